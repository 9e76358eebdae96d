package convert

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/hashing"
)

// build assembles, hashes and compresses one shard (spec sections 3.1,
// 6.4). It runs on its own goroutine, several at once.
func (p *pipeline) build(job *shardJob) shardResult {
	n := len(job.records)
	head := 4 + 4*(n+1)
	total := int64(head) + int64(len(p.config)) + job.bytes
	if total > maxShardBytes {
		return shardResult{err: fmt.Errorf("convert: shard %d would be %d bytes, over the 4 GiB MDS limit", job.index, total)}
	}
	raw := make([]byte, total)
	le := binary.LittleEndian
	le.PutUint32(raw, uint32(n))
	copy(raw[head:], p.config)
	off := head + len(p.config)
	for j, rec := range job.records {
		le.PutUint32(raw[4+4*j:], uint32(off))
		off += copy(raw[off:], rec)
	}
	le.PutUint32(raw[4+4*n:], uint32(off))

	info := p.shardTemplate()
	info.Samples = n
	name := fmt.Sprintf("shard.%05d.mds", job.index)
	hs, err := hashing.SumAll(p.r.hashes, raw)
	if err != nil {
		return shardResult{err: fmt.Errorf("convert: %w", err)}
	}
	info.RawData = format.FileInfo{Basename: name, Bytes: total, Hashes: hs}
	file := raw
	if p.comp != nil {
		file, err = p.comp.Compress(nil, raw)
		if err != nil {
			return shardResult{err: fmt.Errorf("convert: compress shard %d: %w", job.index, err)}
		}
		zh, err := hashing.SumAll(p.r.hashes, file)
		if err != nil {
			return shardResult{err: fmt.Errorf("convert: %w", err)}
		}
		info.ZipData = &format.FileInfo{Basename: name + "." + p.r.compSpec.Family, Bytes: int64(len(file)), Hashes: zh}
	}
	return shardResult{info: info, file: file, rawSize: total}
}

// store writes a built shard's file. Several run at once.
func (p *pipeline) store(ctx context.Context, job *shardJob) error {
	res := &job.res
	stored := res.info.RawData.Basename
	if res.info.ZipData != nil {
		stored = res.info.ZipData.Basename
	}
	if err := putObject(ctx, p.out, p.r.prefix+stored, res.file, "application/octet-stream"); err != nil {
		return err
	}
	if p.r.testHook != nil {
		p.r.testHook("shard", job.index)
	}
	return nil
}

// journal records a stored shard, in shard order.
func (p *pipeline) journal(ctx context.Context, job *shardJob) error {
	res := &job.res
	p.cumRaw += res.rawSize
	p.cumStored += int64(len(res.file))
	st := job.stats
	st.Shards, st.RawBytes, st.StoredBytes = job.index+1, p.cumRaw, p.cumStored
	one := format.AppendIndex(nil, &format.Index{Shards: []format.ShardInfo{res.info}})
	e := &journalEntry{
		Version: journalVersion, Fingerprint: p.fp, Shard: job.index, Next: job.next,
		Stats: st, ElapsedSec: p.resume.elapsed + time.Since(p.start).Seconds(), Index: string(one),
		Carry: job.carry,
	}
	if err := writeJournal(ctx, p.out, p.r.prefix, e); err != nil {
		return err
	}
	if p.r.testHook != nil {
		p.r.testHook("journal", job.index)
	}
	p.infos = append(p.infos, res.info)
	res.file = nil // release the shard's memory
	p.written.Store(st.SamplesOut)
	p.bytes.Store(st.StoredBytes)
	p.shards.Store(int64(len(p.infos)))
	return nil
}
