package dashboard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// coalesce is how long the Source gathers watch events before it sends one snapshot, so a burst
// (1,000 VMs listed at once) renders once, not 1,000 times.
const coalesce = 50 * time.Millisecond

// Watch feeds send with RowsMsg snapshots of the VMs and instances in namespace ("" for all),
// from informers (list, then watch; a dropped watch is re-established by the informer, and
// ConnMsg says so meanwhile), until ctx ends. It returns once the informers have stopped.
func Watch(ctx context.Context, c client.WithWatch, namespace string, send func(tea.Msg)) error {
	vms := informer(c, namespace, &virtv1.VirtualMachine{}, func() client.ObjectList { return &virtv1.VirtualMachineList{} })
	vmis := informer(c, namespace, &virtv1.VirtualMachineInstance{}, func() client.ObjectList { return &virtv1.VirtualMachineInstanceList{} })
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for _, inf := range []toolscache.SharedIndexInformer{vms, vmis} {
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { notify() }, UpdateFunc: func(any, any) { notify() }, DeleteFunc: func(any) { notify() },
		}); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
			if !errors.Is(err, context.Canceled) {
				send(ConnMsg{Err: err})
			}
		}); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
	}
	var wg sync.WaitGroup
	for _, inf := range []toolscache.SharedIndexInformer{vms, vmis} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	}
	defer wg.Wait()
	if !toolscache.WaitForCacheSync(ctx.Done(), vms.HasSynced, vmis.HasSynced) {
		return nil // ctx ended first
	}
	notify()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		select { // gather a burst
		case <-ctx.Done():
			return nil
		case <-time.After(coalesce):
		}
		send(ConnMsg{})
		send(RowsMsg(Rows(itemsOf[virtv1.VirtualMachine](vms), itemsOf[virtv1.VirtualMachineInstance](vmis))))
	}
}

// informer lists and watches one kind through c.
func informer(c client.WithWatch, namespace string, example client.Object, newList func() client.ObjectList) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := newList()
			err := c.List(ctx, list, client.InNamespace(namespace), &client.ListOptions{Raw: &opts})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, newList(), client.InNamespace(namespace), &client.ListOptions{Raw: &opts})
		},
	}
	return toolscache.NewSharedIndexInformer(lw, example, 0, toolscache.Indexers{})
}

// itemsOf copies the informer's objects of type T.
func itemsOf[T any, PT interface{ *T }](inf toolscache.SharedIndexInformer) []T {
	objs := inf.GetStore().List()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(PT); ok {
			out = append(out, *t)
		}
	}
	return out
}
