package input

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// localFolder is an image folder on the local file system, walked as
// torchvision's ImageFolder walks it (os.walk with followlinks=True):
// symbolic links to files and to directories are followed, so a folder
// made of links (a subset of ImageNet linked from the full set, say) holds
// the images they point at. The store of the folder's directory would skip
// links that lead out of it.
type localFolder struct {
	real map[string]string // key → the path the file is read at
}

// localFolderRoot returns the local directory an image folder spec names,
// or "" for a store URL.
func localFolderRoot(root string) string {
	if rest, ok := strings.CutPrefix(root, "file://"); ok {
		return rest
	}
	if strings.Contains(root, "://") {
		return ""
	}
	return root
}

// walkLocalFolder calls fn for every regular file under dir (links
// followed) with its key (its path under dir, slash-separated) and size,
// in key order. A directory that is its own ancestor through a link (a
// cycle) is not entered again; dangling links are skipped.
func walkLocalFolder(ctx context.Context, dir string, fn func(key string, size int64) error) (*localFolder, error) {
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	lf := &localFolder{real: map[string]string{}}
	var walk func(real, prefix string, ancestors []string) error
	walk = func(real, prefix string, ancestors []string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := os.ReadDir(real)
		if err != nil {
			return fmt.Errorf("input: list image folder %s: %w", dir, err)
		}
		for _, e := range entries {
			p := filepath.Join(real, e.Name())
			if e.Type()&os.ModeSymlink != 0 {
				if p, err = filepath.EvalSymlinks(p); err != nil {
					continue // dangling
				}
			}
			fi, err := os.Stat(p)
			if err != nil {
				continue // vanished
			}
			key := prefix + e.Name()
			switch {
			case fi.IsDir():
				if slices.Contains(ancestors, p) {
					continue // a link back up: a cycle
				}
				if err := walk(p, key+"/", append(ancestors, p)); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				lf.real[key] = p
				if err := fn(key, fi.Size()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(realDir, "", []string{realDir}); err != nil {
		return nil, err
	}
	return lf, nil
}
