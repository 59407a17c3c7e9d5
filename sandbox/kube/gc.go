package kube

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corralhq/corral/sandbox"
)

// List describes every corral sandbox pod of the namespace, running or not.
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	pods, err := b.api.listPods(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelSession})
	if err != nil {
		return nil, b.apiError(err, "list pods")
	}
	out := make([]sandbox.Info, 0, len(pods.Items))
	for i := range pods.Items {
		out = append(out, info(&pods.Items[i]))
	}
	return out, nil
}

// info describes one sandbox pod.
func info(pod *corev1.Pod) sandbox.Info {
	owner := ownerOf(pod.ObjectMeta)
	in := sandbox.Info{
		ID:        string(pod.UID),
		Name:      pod.Name,
		Session:   owner[sandbox.LabelSession],
		Workspace: owner[sandbox.LabelWorkspace],
		State:     strings.ToLower(string(pod.Status.Phase)),
		Status:    string(pod.Status.Phase),
		Created:   pod.CreationTimestamp.Time,
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == sandboxContainer {
			in.Image = c.Image
		}
	}
	if pod.DeletionTimestamp != nil {
		in.State, in.Status = "deleting", "Terminating"
	}
	if pod.Status.Reason != "" {
		in.Status += " (" + pod.Status.Reason + ")"
	}
	if st := containerStatus(pod, sandboxContainer); st != nil {
		switch {
		case st.State.Waiting != nil:
			in.Status += ": " + st.State.Waiting.Reason
		case st.State.Terminated != nil:
			in.Status += ": " + st.State.Terminated.Reason + " (" + strconv.Itoa(int(st.State.Terminated.ExitCode)) + ")"
		case st.State.Running != nil:
			in.Status = "Up " + time.Since(st.State.Running.StartedAt.Time).Round(time.Second).String()
		}
	}
	in.PID, _ = strconv.Atoi(owner[sandbox.LabelPID])
	in.Local, in.OwnerAlive = sandbox.OwnerState(owner)
	return in
}

// GC deletes the sandbox pods whose owner process ran on this host and is
// gone, and the SandboxClaims of such owners where the cluster has warm
// pools, and returns their names (a claim's as claim/NAME). Those of live
// owners, and of other hosts, are left alone.
func (b *Backend) GC(ctx context.Context) ([]string, error) {
	infos, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, in := range infos {
		if !in.Local || in.OwnerAlive {
			continue
		}
		if err := b.deletePod(ctx, in.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, in.Name)
	}
	claims, err := b.gcClaims(ctx)
	return append(removed, claims...), errors.Join(append(errs, err)...)
}
