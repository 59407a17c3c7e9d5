package kube

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// objects are the objects of one resource of agent-sandbox's extensions
// group (SandboxTemplate, SandboxWarmPool, SandboxClaim) in the backend's
// namespace, read and written as unstructured JSON: corral links none of
// agent-sandbox's types, nor its controller-runtime.
type objects struct {
	rc        *rest.RESTClient
	err       error // of making rc
	namespace string
	resource  string
}

// agents returns the objects of resource ("sandboxclaims", ...).
func (b *Backend) agents(resource string) objects {
	b.agentsOnce.Do(func() {
		c := rest.CopyConfig(b.rest)
		c.APIPath = "/apis"
		c.GroupVersion = &schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1alpha1"}
		c.ContentType = runtime.ContentTypeJSON
		c.NegotiatedSerializer = codecs.WithoutConversion()
		b.agentsRC, b.agentsErr = rest.RESTClientFor(c)
	})
	return objects{rc: b.agentsRC, err: b.agentsErr, namespace: b.namespace, resource: resource}
}

func (o objects) create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if o.err != nil {
		return nil, o.err
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	raw, err := o.rc.Post().Namespace(o.namespace).Resource(o.resource).Body(body).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := new(unstructured.Unstructured)
	return out, out.UnmarshalJSON(raw)
}

func (o objects) get(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	if o.err != nil {
		return nil, o.err
	}
	raw, err := o.rc.Get().Namespace(o.namespace).Resource(o.resource).Name(name).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := new(unstructured.Unstructured)
	return out, out.UnmarshalJSON(raw)
}

// list lists the objects that labelSelector selects (all when empty).
func (o objects) list(ctx context.Context, labelSelector string) (*unstructured.UnstructuredList, error) {
	if o.err != nil {
		return nil, o.err
	}
	req := o.rc.Get().Namespace(o.namespace).Resource(o.resource)
	if labelSelector != "" {
		req = req.Param("labelSelector", labelSelector)
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := new(unstructured.UnstructuredList)
	return out, out.UnmarshalJSON(raw)
}

// delete deletes name; what it owns goes after it, in the background (the
// garbage collector's cascade).
func (o objects) delete(ctx context.Context, name string) error {
	if o.err != nil {
		return o.err
	}
	body, _ := json.Marshal(map[string]string{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
	_, err := o.rc.Delete().Namespace(o.namespace).Resource(o.resource).Name(name).Body(body).DoRaw(ctx)
	return err
}

// patchPod applies a JSON merge patch to pod name.
func (c *client) patchPod(ctx context.Context, name string, patch []byte) (*corev1.Pod, error) {
	out := new(corev1.Pod)
	err := c.core.Patch(types.MergePatchType).Namespace(c.namespace).Resource("pods").Name(name).Body(patch).Do(ctx).Into(out)
	return out, err
}
