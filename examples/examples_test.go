package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicedata/sluice/config"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/cli"
	"github.com/sluicedata/sluice/plan"
)

func read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func sluice(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := cli.Run(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// sbatch returns the #SBATCH --name=value directives of a script.
func sbatch(t *testing.T, script string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(script, "\n") {
		if rest, ok := strings.CutPrefix(line, "#SBATCH --"); ok {
			k, v, _ := strings.Cut(strings.TrimSpace(rest), "=")
			out[k] = v
		}
	}
	return out
}

// words splits a shell command line (double quotes, backslash-newline
// continuations) after expanding $VAR and ${VAR} from env.
func words(line string, env map[string]string) []string {
	line = strings.ReplaceAll(line, "\\\n", " ")
	line = os.Expand(line, func(k string) string {
		k, _, _ = strings.Cut(k, ":-")
		return env[k]
	})
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case (r == ' ' || r == '\t' || r == '\n') && !inQuote:
			if have {
				out = append(out, cur.String())
			}
			cur.Reset()
			have = false
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// commandLine returns the (continued) line of script that starts with cmd.
func commandLine(t *testing.T, script, cmd string) string {
	t.Helper()
	lines := strings.Split(script, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), cmd+" ") {
			full := l
			for strings.HasSuffix(full, "\\") && i+1 < len(lines) {
				i++
				full += "\n" + lines[i]
			}
			return full
		}
	}
	t.Fatalf("no %q line in the script", cmd)
	return ""
}

func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %q", name, args)
	return ""
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// checkRanks places every process through plan.DetectWorld and checks that
// each global rank appears once, with the launcher nesting expected.
func checkRanks(t *testing.T, envs []map[string]string, nodes, perNode int, outer string) {
	t.Helper()
	seen := map[int]bool{}
	for _, env := range envs {
		p, err := plan.DetectWorld(func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("env %v: %v", env, err)
		}
		if p.Nodes != nodes || p.RanksPerNode != perNode || p.Launcher != plan.LauncherTorchrun ||
			len(p.Outer) != 1 || p.Outer[0] != outer {
			t.Fatalf("env %v: placement %+v, want %d nodes × %d, torchrun inside %s", env, p, nodes, perNode, outer)
		}
		if seen[p.Rank] {
			t.Fatalf("rank %d placed twice", p.Rank)
		}
		seen[p.Rank] = true
	}
	if len(seen) != nodes*perNode {
		t.Fatalf("%d ranks placed, want %d", len(seen), nodes*perNode)
	}
	checkPython(t, envs)
}

// checkPython places the same processes with the Python client's detector
// (sluice._world.placement) and compares with plan.DetectWorld.
func checkPython(t *testing.T, envs []map[string]string) {
	t.Helper()
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatalf("%s missing under CI", py)
		}
		t.Skipf("%s missing", py)
	}
	in, err := json.Marshal(envs)
	if err != nil {
		t.Fatal(err)
	}
	code := "import json, sys; from sluice import _world; " +
		"print(json.dumps([_world.placement(e) for e in json.load(sys.stdin)]))"
	cmd := exec.Command(py, "-c", code)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "python"))
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python detector: %v", err)
	}
	var got []struct {
		Nodes        int    `json:"nodes"`
		RanksPerNode int    `json:"ranks_per_node"`
		Rank         int    `json:"rank"`
		LocalRank    int    `json:"local_rank"`
		Launcher     string `json:"launcher"`
		JobID        string `json:"job_id"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(envs) {
		t.Fatalf("python detector output %s: %v", out, err)
	}
	for i, env := range envs {
		p, _ := plan.DetectWorld(func(k string) string { return env[k] })
		g := got[i]
		if g.Nodes != p.Nodes || g.RanksPerNode != p.RanksPerNode || g.Rank != p.Rank || g.LocalRank != p.LocalRank ||
			g.Launcher != p.Launcher || g.JobID != p.JobID {
			t.Fatalf("env %v: Python places %+v, Go %+v", env, g, p)
		}
	}
}

func torchrunEnvs(base map[string]string, node, nnodes, nproc int, runID string) []map[string]string {
	var out []map[string]string
	for l := range nproc {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		env["RANK"] = strconv.Itoa(node*nproc + l)
		env["WORLD_SIZE"] = strconv.Itoa(nnodes * nproc)
		env["LOCAL_WORLD_SIZE"] = strconv.Itoa(nproc)
		env["LOCAL_RANK"] = strconv.Itoa(l)
		env["TORCHELASTIC_RUN_ID"] = runID
		out = append(out, env)
	}
	return out
}

func TestJobFiles(t *testing.T) {
	names, _ := filepath.Glob("configs/*.yaml")
	if len(names) < 4 {
		t.Fatalf("configs: %v", names)
	}
	kinds := map[string]bool{}
	for _, name := range names {
		c, err := config.Load(context.Background(), nil, name)
		if err != nil {
			t.Fatal(err)
		}
		kinds[c.Kind] = true
		// Every flag exists on its command and parses.
		if out := sluice(t, "run", "--dry-run", name); out == "" {
			t.Errorf("%s: empty dry run", name)
		}
	}
	for _, k := range []string{"train", "convert", "stream", "bench", "serve"} {
		if !kinds[k] {
			t.Errorf("no example job file of kind %s", k)
		}
	}
}

func TestSlurmTrain(t *testing.T) {
	script := read(t, "slurm/train.sbatch")
	d := sbatch(t, script)
	nodes, tasks := atoi(t, d["nodes"]), atoi(t, d["ntasks-per-node"])
	if tasks != 1 {
		t.Fatalf("train.sbatch: %d tasks per node; torchrun wants one per node", tasks)
	}
	var envs []map[string]string
	for node := range nodes {
		slurm := map[string]string{"SLURM_PROCID": strconv.Itoa(node), "SLURM_NTASKS": strconv.Itoa(nodes * tasks),
			"SLURM_NNODES": strconv.Itoa(nodes), "SLURM_NTASKS_PER_NODE": strconv.Itoa(tasks), "SLURM_LOCALID": "0",
			"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_JOB_NODELIST": "gpu[01-02]"}
		args := words(commandLine(t, script, "torchrun"), slurm)
		nnodes, nproc := atoi(t, flagValue(t, args, "--nnodes")), atoi(t, flagValue(t, args, "--nproc_per_node"))
		if nnodes != nodes || flagValue(t, args, "--rdzv_backend") != "c10d" || flagValue(t, args, "--rdzv_id") != "4242" {
			t.Fatalf("torchrun line %q", args)
		}
		envs = append(envs, torchrunEnvs(slurm, node, nnodes, nproc, "4242")...)
	}
	checkRanks(t, envs, nodes, 8, plan.LauncherSlurm)
	if !strings.Contains(script, "SLUICE_CONFIG") || !strings.Contains(script, "SLUICE_AGENT_DIR") {
		t.Error("train.sbatch does not set the job file and the node-local agent directory")
	}
}

// TestSlurmConvertArray runs every task of the array and the merge, in
// process, on a small local input: the parts together hold every record.
func TestSlurmConvertArray(t *testing.T) {
	script := read(t, "slurm/convert-array.sbatch")
	arr := sbatch(t, script)["array"]
	m := regexp.MustCompile(`^0-(\d+)$`).FindStringSubmatch(arr)
	if m == nil {
		t.Fatalf("--array=%s: want 0-N", arr)
	}
	count := atoi(t, m[1]) + 1
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var buf bytes.Buffer
	const records = 500
	for i := range records {
		fmt.Fprintf(&buf, "{\"id\": %d, \"text\": \"caption %d\"}\n", i, i)
	}
	if err := os.WriteFile(in, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "mds")
	line := commandLine(t, script, "sluice")
	for i := range count {
		env := map[string]string{"INPUT": in, "OUTPUT": out, "SLURM_ARRAY_TASK_ID": strconv.Itoa(i), "SLURM_ARRAY_TASK_COUNT": strconv.Itoa(count)}
		args := words(line, env)
		if flagValue(t, args, "--part") != fmt.Sprintf("%d/%d", i, count) {
			t.Fatalf("task %d: %q", i, args)
		}
		sluice(t, args[1:]...)
	}
	merge := words(commandLine(t, read(t, "slurm/merge.sbatch"), "sluice"), map[string]string{"OUTPUT": out})
	sluice(t, merge[1:]...)
	data, err := os.ReadFile(filepath.Join(out, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := format.ParseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, s := range idx.Shards {
		total += int(s.Samples)
	}
	if total != records {
		t.Fatalf("merged dataset holds %d samples, the input %d", total, records)
	}
}

func yamlFile(t *testing.T, name string) map[string]any {
	t.Helper()
	var doc map[string]any
	dec := yaml.NewDecoder(strings.NewReader(read(t, name)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

// get walks a decoded YAML document: keys for mappings, ints for lists.
func get(t *testing.T, doc any, path ...any) any {
	t.Helper()
	cur := doc
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("path %v: %T is not a mapping at %q", path, cur, k)
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("path %v: no item %d", path, k)
			}
			cur = l[k]
		}
	}
	return cur
}

func strs(t *testing.T, v any) []string {
	t.Helper()
	l, _ := v.([]any)
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = fmt.Sprint(x)
	}
	return out
}

func TestKubernetesConvert(t *testing.T) {
	job := yamlFile(t, "kubernetes/convert-indexed-job.yaml")
	if get(t, job, "spec", "completionMode") != "Indexed" {
		t.Fatal("not an Indexed Job")
	}
	completions := get(t, job, "spec", "completions").(int)
	args := strs(t, get(t, job, "spec", "template", "spec", "containers", 0, "args"))
	if args[0] != "sluice" || args[1] != "convert" || atoi(t, flagValue(t, args, "--parts")) != completions {
		t.Fatalf("args %q: want sluice convert ... --parts %d", args, completions)
	}
	// The flags exist on sluice convert: as a job file, dry-run.
	var flags []string
	var pos []string
	for i := 2; i < len(args); i++ {
		if strings.HasPrefix(args[i], "--") {
			flags = append(flags, fmt.Sprintf("  %s: %q", strings.TrimPrefix(args[i], "--"), args[i+1]))
			i++
		} else {
			pos = append(pos, fmt.Sprintf("%q", args[i]))
		}
	}
	p := filepath.Join(t.TempDir(), "job.yaml")
	doc := "kind: convert\nargs: [" + strings.Join(pos, ", ") + "]\nflags:\n" + strings.Join(flags, "\n") + "\n"
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	sluice(t, "run", "--dry-run", p)
	merge := yamlFile(t, "kubernetes/merge-job.yaml")
	margs := strs(t, get(t, merge, "spec", "template", "spec", "containers", 0, "args"))
	if len(margs) != 3 || margs[1] != "merge" || margs[2] != args[3] {
		t.Errorf("merge job %q does not merge the conversion's output %s", margs, args[3])
	}
}

func TestPyTorchJob(t *testing.T) {
	job := yamlFile(t, "kubernetes/train-pytorchjob.yaml")
	nproc := atoi(t, get(t, job, "spec", "nprocPerNode").(string))
	masters := get(t, job, "spec", "pytorchReplicaSpecs", "Master", "replicas").(int)
	workers := get(t, job, "spec", "pytorchReplicaSpecs", "Worker", "replicas").(int)
	pods := masters + workers
	pod := get(t, job, "spec", "pytorchReplicaSpecs", "Worker", "template", "spec")
	container := get(t, pod, "containers", 0)
	env := map[string]string{}
	for _, e := range get(t, container, "env").([]any) {
		env[get(t, e, "name").(string)] = fmt.Sprint(get(t, e, "value"))
	}
	// The agent directory is on a node-local hostPath volume.
	var mount string
	for _, m := range get(t, container, "volumeMounts").([]any) {
		if strings.HasPrefix(env["SLUICE_AGENT_DIR"], get(t, m, "mountPath").(string)+"/") {
			mount = get(t, m, "name").(string)
		}
	}
	hostPath := false
	for _, v := range get(t, pod, "volumes").([]any) {
		if get(t, v, "name") == mount && get(t, v, "hostPath") != nil {
			hostPath = true
		}
	}
	if !hostPath {
		t.Fatalf("SLUICE_AGENT_DIR=%s is not on a hostPath volume", env["SLUICE_AGENT_DIR"])
	}
	// The job file the pods run starts torchrun for this many nodes and
	// ranks per node; its cache is on the same volume.
	c, err := config.Load(context.Background(), nil, "configs/train.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if atoi(t, flagValue(t, c.Command, "--nnodes")) != pods || atoi(t, flagValue(t, c.Command, "--nproc_per_node")) != nproc {
		t.Fatalf("configs/train.yaml runs %q; the PyTorchJob has %d pods × %d", c.Command, pods, nproc)
	}
	var envs []map[string]string
	for podIndex := range pods {
		// What the training operator sets in each pod.
		base := map[string]string{"PET_NNODES": strconv.Itoa(pods), "PET_NPROC_PER_NODE": strconv.Itoa(nproc),
			"PET_NODE_RANK": strconv.Itoa(podIndex), "MASTER_ADDR": "sluice-train-master-0", "MASTER_PORT": "23456"}
		for k, v := range env {
			base[k] = v
		}
		envs = append(envs, torchrunEnvs(base, podIndex, pods, nproc, "sluice-train")...)
	}
	checkRanks(t, envs, pods, nproc, plan.LauncherKubernetes)
}

func TestDockerfile(t *testing.T) {
	df := read(t, "../Dockerfile")
	sc := bufio.NewScanner(strings.NewReader(df))
	copied := map[string]bool{}
	entry := ""
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "COPY" && !strings.HasPrefix(f[1], "--from") {
			for _, src := range f[1 : len(f)-1] {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("Dockerfile copies %s: %v", src, err)
				}
			}
			copied[f[len(f)-1]] = true
		}
		if len(f) >= 2 && f[0] == "ENTRYPOINT" {
			entry = strings.Trim(f[1], `["]`)
		}
	}
	if !copied[entry] {
		t.Errorf("ENTRYPOINT %s is not a file the Dockerfile copies in", entry)
	}
	if !strings.Contains(df, "./cmd/sluice") || !strings.Contains(df, "CGO_ENABLED=0") {
		t.Error("the Dockerfile does not build the static binary")
	}
}
