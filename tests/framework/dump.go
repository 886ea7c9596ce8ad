package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Dump logs the namespace's events (oldest first), the logs of every container of every pod
// (current and previous instance) and the YAML of every namespaced object except Secrets' data.
func (f *Framework) Dump(ctx context.Context) {
	var b strings.Builder
	fmt.Fprintf(&b, "===== dump of namespace %s =====\n", f.Namespace)
	f.dumpEvents(ctx, &b)
	f.dumpLogs(ctx, &b)
	f.dumpObjects(ctx, &b)
	f.t.Log(b.String())
}

func (f *Framework) dumpEvents(ctx context.Context, b *strings.Builder) {
	events, err := f.Clientset.CoreV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "--- events: %v\n", err)
		return
	}
	items := events.Items
	sort.Slice(items, func(i, j int) bool { ti, tj := eventTime(items[i]), eventTime(items[j]); return ti.Before(&tj) })
	fmt.Fprintf(b, "--- events (%d)\n", len(items))
	for _, e := range items {
		fmt.Fprintf(b, "%s %s %s/%s %s: %s (x%d)\n", eventTime(e).Format("15:04:05"), e.Type,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, max(e.Count, 1))
	}
}

func eventTime(e corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	default:
		return e.CreationTimestamp
	}
}

func (f *Framework) dumpLogs(ctx context.Context, b *strings.Builder) {
	pods, err := f.Clientset.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "--- pods: %v\n", err)
		return
	}
	for _, p := range pods.Items {
		all := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		for _, s := range all {
			fmt.Fprintf(b, "--- logs %s/%s (restarts %d)\n%s\n", p.Name, s.Name, s.RestartCount, f.podLogs(ctx, p.Name, s.Name, false))
			if s.RestartCount > 0 {
				fmt.Fprintf(b, "--- previous logs %s/%s\n%s\n", p.Name, s.Name, f.podLogs(ctx, p.Name, s.Name, true))
			}
		}
	}
}

// dumpObjects prints every listable namespaced resource found by discovery, so objects of any
// API (Podvirt's CRDs included) appear without this package knowing them.
func (f *Framework) dumpObjects(ctx context.Context, b *strings.Builder) {
	lists, err := f.Clientset.Discovery().ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		fmt.Fprintf(b, "--- discovery: %v\n", err)
		return
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !hasVerb(r.Verbs, "list") || strings.Contains(r.Name, "/") || r.Kind == "Event" {
				continue
			}
			objs, err := f.Dynamic.Resource(gv.WithResource(r.Name)).Namespace(f.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil || len(objs.Items) == 0 {
				continue
			}
			for _, o := range objs.Items {
				if r.Kind == "Secret" {
					delete(o.Object, "data")
				}
				unstructuredDropManagedFields(o.Object)
				y, _ := yaml.Marshal(o.Object)
				fmt.Fprintf(b, "--- %s %s\n%s", r.Kind, o.GetName(), y)
			}
		}
	}
}

func unstructuredDropManagedFields(obj map[string]any) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}
