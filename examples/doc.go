// Package examples holds no code: its test (examples_test.go) exercises the
// Slurm scripts, Kubernetes manifests and job files in this directory.
package examples
