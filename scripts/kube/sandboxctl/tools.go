//go:build tools

// Package tools pins agent-sandbox's controller (sigs.k8s.io/agent-sandbox),
// which scripts/kube/cluster.sh builds from this module for the test cluster.
package tools

import (
	_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
)
