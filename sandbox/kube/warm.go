package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// warmPoolGroup is agent-sandbox's API group of SandboxTemplate,
// SandboxClaim and SandboxWarmPool.
const warmPoolGroup = "extensions.agents.x-k8s.io/v1alpha1"

// ErrNoWarmPools says the cluster serves no agent-sandbox CRDs.
var ErrNoWarmPools = errors.New("kubernetes: --warm-pool: the cluster serves no agent-sandbox CRDs (" + warmPoolGroup + " SandboxWarmPool): install agent-sandbox's CRDs and controller, or leave --warm-pool out to create plain pods")

// checkWarmPool is what Options.WarmPool does today: it tells a cluster
// without agent-sandbox's CRDs from one with them, and refuses both, the
// second because claiming from a pool is not done yet (see README, Known
// limits: agent-sandbox's controller could not be built here to test it).
func (b *Backend) checkWarmPool(ctx context.Context) error {
	res, err := b.api.resources(ctx, warmPoolGroup)
	if apierrors.IsNotFound(err) {
		return ErrNoWarmPools
	}
	if err != nil {
		return b.apiError(err, "look for agent-sandbox's CRDs")
	}
	for _, r := range res.APIResources {
		if r.Kind == "SandboxWarmPool" {
			return fmt.Errorf("kubernetes: --warm-pool %s: the cluster has agent-sandbox's SandboxWarmPool, but corral does not claim from it yet: leave --warm-pool out to create plain pods", b.opts.WarmPool)
		}
	}
	return ErrNoWarmPools
}
