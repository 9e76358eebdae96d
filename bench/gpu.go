package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GPUSample is one nvidia-smi reading of one GPU.
type GPUSample struct {
	// At is the time since sampling began.
	At time.Duration
	// GPU is the device index; Util its utilization in percent; MemMiB
	// its memory in use.
	GPU    int
	Util   float64
	MemMiB float64
}

// gpuSampler runs nvidia-smi in its looping mode and parses its lines.
type gpuSampler struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []GPUSample
}

// startGPU starts `nvidia-smi --query-gpu=index,utilization.gpu,memory.used
// --format=csv,noheader,nounits -lms MS` when nvidia-smi is on PATH.
func startGPU(ctx context.Context, interval time.Duration) (*gpuSampler, error) {
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, errors.New("not found on PATH")
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, path, "--query-gpu=index,utilization.gpu,memory.used",
		"--format=csv,noheader,nounits", "-lms", strconv.Itoa(int(interval.Milliseconds())))
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	g := &gpuSampler{cmd: cmd, cancel: cancel}
	begin := time.Now()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := parseGPULine(sc.Text()); ok {
				s.At = time.Since(begin)
				g.mu.Lock()
				g.samples = append(g.samples, s)
				g.mu.Unlock()
			}
		}
	}()
	return g, nil
}

// parseGPULine reads "0, 87, 10240" (index, utilization %, memory MiB);
// "[N/A]" fields and other lines are skipped.
func parseGPULine(line string) (GPUSample, bool) {
	f := strings.Split(line, ",")
	if len(f) != 3 {
		return GPUSample{}, false
	}
	idx, err1 := strconv.Atoi(strings.TrimSpace(f[0]))
	u, err2 := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(f[1]), " %"), 64)
	m, err3 := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(f[2]), " MiB"), 64)
	if err1 != nil || err2 != nil || err3 != nil || idx < 0 || u < 0 || u > 100 || m < 0 {
		return GPUSample{}, false
	}
	return GPUSample{GPU: idx, Util: u, MemMiB: m}, true
}

func (g *gpuSampler) stop() []GPUSample {
	g.cancel()
	_ = g.cmd.Wait()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.samples
}
