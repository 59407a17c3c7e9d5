package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The scheme of the three API groups corral speaks — core/v1 (pods and
// their attach), networking/v1 (the NetworkPolicy) and authorization/v1
// (SelfSubjectAccessReview) — and its codecs. client-go's Clientset and its
// kubernetes/scheme register every group of Kubernetes (some fifty) when
// the program starts, and link their clients in: corral, whose agent is the
// same binary, paid for them in every process (see client).
var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(networkingv1.AddToScheme(scheme))
	utilruntime.Must(authorizationv1.AddToScheme(scheme))
	// Status, WatchEvent and the options of every request, unversioned.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
}

// client is the small typed client of the few requests corral makes: pods
// (create, get, list, watch, delete, the attach URL), a NetworkPolicy (get,
// create), a SelfSubjectAccessReview (create) and two discovery reads. It
// speaks JSON through a rest.RESTClient per group. Its methods are safe for
// concurrent use.
type client struct {
	namespace     string
	core          *rest.RESTClient // /api/v1
	networking    *rest.RESTClient // /apis/networking.k8s.io/v1
	authorization *rest.RESTClient // /apis/authorization.k8s.io/v1
}

// newClient returns the client of cfg's cluster for namespace.
func newClient(cfg *rest.Config, namespace string) (*client, error) {
	group := func(apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.APIPath = apiPath
		c.GroupVersion = &gv
		c.ContentType = runtime.ContentTypeJSON
		c.NegotiatedSerializer = codecs.WithoutConversion()
		return rest.RESTClientFor(c)
	}
	var c client
	var err error
	c.namespace = namespace
	if c.core, err = group("/api", corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.networking, err = group("/apis", networkingv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.authorization, err = group("/apis", authorizationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *client) createPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	out := new(corev1.Pod)
	err := c.core.Post().Namespace(c.namespace).Resource("pods").Body(pod).Do(ctx).Into(out)
	return out, err
}

func (c *client) getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	out := new(corev1.Pod)
	err := c.core.Get().Namespace(c.namespace).Resource("pods").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *client) listPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := new(corev1.PodList)
	err := c.core.Get().Namespace(c.namespace).Resource("pods").VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *client) watchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.core.Get().Namespace(c.namespace).Resource("pods").VersionedParams(&opts, parameterCodec).Watch(ctx)
}

func (c *client) deletePod(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.core.Delete().Namespace(c.namespace).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

// podURL is the URL of a pod's subresource (attach, exec) with opts (a
// *corev1.PodAttachOptions or *corev1.PodExecOptions) as its query.
func (c *client) podURL(name, sub string, opts runtime.Object) *url.URL {
	return c.core.Post().Namespace(c.namespace).Resource("pods").Name(name).SubResource(sub).VersionedParams(opts, parameterCodec).URL()
}

func (c *client) getNetworkPolicy(ctx context.Context, name string) (*networkingv1.NetworkPolicy, error) {
	out := new(networkingv1.NetworkPolicy)
	err := c.networking.Get().Namespace(c.namespace).Resource("networkpolicies").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *client) createNetworkPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) (*networkingv1.NetworkPolicy, error) {
	out := new(networkingv1.NetworkPolicy)
	err := c.networking.Post().Namespace(c.namespace).Resource("networkpolicies").Body(np).Do(ctx).Into(out)
	return out, err
}

func (c *client) createAccessReview(ctx context.Context, r *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
	out := new(authorizationv1.SelfSubjectAccessReview)
	err := c.authorization.Post().Resource("selfsubjectaccessreviews").Body(r).Do(ctx).Into(out)
	return out, err
}

// serverVersion reads /version: whether the cluster answers.
func (c *client) serverVersion(ctx context.Context) error {
	body, err := c.core.Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return err
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("/version: %w", err)
	}
	return nil
}

// resources lists the resources the API server serves in groupVersion
// ("group/version"); an error that apierrors.IsNotFound when it serves none.
func (c *client) resources(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	body, err := c.core.Get().AbsPath("/apis", groupVersion).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := new(metav1.APIResourceList)
	if err := json.Unmarshal(body, out); err != nil {
		return nil, fmt.Errorf("/apis/%s: %w", groupVersion, err)
	}
	return out, nil
}
