package format

import (
	"errors"
	"fmt"
)

// parseIndexTree is ParseIndex through the generic JSON tree: the
// reference the compact parser is tested against.
func parseIndexTree(b []byte) (*Index, error) {
	v, err := ParseJSON(b)
	if err != nil {
		return nil, &CorruptError{File: IndexFile, Shard: -1, Sample: -1, Offset: -1, Reason: "bad json", Err: err}
	}
	top, ok := v.(*JSONObject)
	if !ok {
		return nil, Corruptf(IndexFile, "top level is not an object")
	}
	if err := wantVersion(top.Values["version"]); err != nil {
		return nil, &CorruptError{File: IndexFile, Shard: -1, Sample: -1, Offset: -1, Reason: "top level", Err: err}
	}
	arr, ok := top.Values["shards"].([]any)
	if !ok {
		return nil, Corruptf(IndexFile, "missing or non-array \"shards\"")
	}
	if len(arr) > MaxIndexShards {
		return nil, Corruptf(IndexFile, "%d shards exceed the limit of %d", len(arr), MaxIndexShards)
	}
	idx := &Index{Shards: make([]ShardInfo, len(arr))}
	for _, k := range top.Keys {
		if k == "version" {
			idx.Merged = true
			break
		}
		if k == "shards" {
			break
		}
	}
	for i, e := range arr {
		if err := parseShard(&idx.Shards[i], e); err != nil {
			ce := &CorruptError{File: IndexFile, Shard: i, Sample: -1, Offset: -1, Err: err}
			return nil, ce
		}
	}
	return idx, nil
}

func wantVersion(v any) error {
	n, ok := v.(JSONNumber)
	if !ok {
		return errors.New("missing or non-integer \"version\"")
	}
	if n != "2" {
		return fmt.Errorf("unsupported version %s (want 2)", n)
	}
	return nil
}

// shardKeys are the keys parseShard understands; anything else goes to Extra.
var shardKeys = map[string]bool{
	"format": true, "version": true, "samples": true, "size_limit": true, "compression": true,
	"hashes": true, "raw_data": true, "zip_data": true, "raw_meta": true, "zip_meta": true,
	"column_encodings": true, "column_names": true, "column_sizes": true, "columns": true,
	"newline": true, "separator": true,
}

func parseShard(s *ShardInfo, v any) error {
	obj, ok := v.(*JSONObject)
	if !ok {
		return errors.New("entry is not an object")
	}
	m := obj.Values
	if err := wantVersion(m["version"]); err != nil {
		return err
	}
	var err error
	if s.Samples, err = reqInt(m, "samples", MaxShardSamples); err != nil {
		return err
	}
	raw, present := m["raw_data"]
	if !present || raw == nil {
		return errors.New("missing \"raw_data\"")
	}
	if err := parseFileInfo(&s.RawData, raw, "raw_data"); err != nil {
		return err
	}
	for _, opt := range []struct {
		key string
		dst **FileInfo
	}{{"zip_data", &s.ZipData}, {"raw_meta", &s.RawMeta}, {"zip_meta", &s.ZipMeta}} {
		if fv, ok := m[opt.key]; ok && fv != nil {
			fi := new(FileInfo)
			if err := parseFileInfo(fi, fv, opt.key); err != nil {
				return err
			}
			*opt.dst = fi
		}
	}
	var extra []string
	for _, k := range obj.Keys {
		if !shardKeys[k] {
			extra = append(extra, k)
		}
	}
	if err := parseConfig(s, m, extra); err != nil {
		return err
	}
	if s.ZipData != nil && s.Compression == "" {
		return errors.New("\"zip_data\" is set but \"compression\" is null")
	}
	// compression without zip_data is allowed: the raw file is read.
	switch s.Format {
	case "mds":
		if s.RawMeta != nil || s.ZipMeta != nil {
			return errors.New("mds shard has a meta file")
		}
		if err := checkSamplesFit(s.Samples, s.RawData.Bytes, "raw_data"); err != nil {
			return err
		}
	case "json", "csv", "tsv", "xsv":
		if s.RawMeta == nil {
			return errors.New("missing \"raw_meta\"")
		}
		if (s.ZipMeta != nil) != (s.ZipData != nil) {
			return errors.New("\"zip_meta\" and \"zip_data\" disagree")
		}
		if err := checkSamplesFit(s.Samples, s.RawMeta.Bytes, "raw_meta"); err != nil {
			return err
		}
	}
	return nil
}

func parseFileInfo(fi *FileInfo, v any, key string) error {
	obj, ok := v.(*JSONObject)
	if !ok {
		return fmt.Errorf("%q is not an object", key)
	}
	bn, ok := obj.Values["basename"].(string)
	if !ok {
		return fmt.Errorf("%q: missing or non-string \"basename\"", key)
	}
	if err := CheckBasename(bn); err != nil {
		return fmt.Errorf("%q: %w", key, err)
	}
	fi.Basename = bn
	n, err := reqInt(obj.Values, "bytes", MaxFileBytes)
	if err != nil {
		return fmt.Errorf("%q: %w", key, err)
	}
	fi.Bytes = int64(n)
	if hv, present := obj.Values["hashes"]; present && hv != nil {
		ho, ok := hv.(*JSONObject)
		if !ok {
			return fmt.Errorf("%q: \"hashes\" is not an object", key)
		}
		if len(ho.Keys) > 64 {
			return fmt.Errorf("%q: too many hashes", key)
		}
		fi.Hashes = make(map[string]string, len(ho.Keys))
		for _, k := range ho.Keys {
			d, ok := ho.Values[k].(string)
			if !ok {
				return fmt.Errorf("%q: hash %q is not a string", key, k)
			}
			fi.Hashes[k] = d
		}
	}
	return nil
}

// checkSamplesFit checks that a shard's file of offsets, of fileBytes
// (an MDS shard's raw file; a JSON or CSV shard's raw meta file), can hold
// samples: the count and samples+1 u32 offsets take 4·samples+8 bytes. A
// count the file cannot hold would have plans and buffers sized to it
// before a byte of the shard is read. An MDS shard's own copy of its
// entry (in its header) has 0 samples and 0 bytes.
func checkSamplesFit(samples int, fileBytes int64, key string) error {
	if min := 4*int64(samples) + 8; samples > 0 && fileBytes < min {
		return fmt.Errorf("\"samples\": %d samples cannot fit in %q of %d bytes (their offsets alone take %d)", samples, key, fileBytes, min)
	}
	return nil
}
