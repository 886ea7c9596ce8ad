package dashboard

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// recentEvents is how many events the detail view gets (it shows the newest that fit).
const recentEvents = 30

// Messages the Source sends.
type (
	// SnapshotMsg is everything listed in Namespace ("" for all) after a burst of watch events.
	SnapshotMsg struct {
		Namespace              string
		VMs, VMIs, ReplicaSets []Row
	}
	// EventsMsg is the recent events of the object Key (namespace/name), newest last.
	EventsMsg struct {
		Key    string
		Events []Event
	}
	// ConnMsg reports the watch connection: Err non-nil while disconnected, or, Denied, while the
	// user may not list or watch one of the kinds.
	ConnMsg struct {
		Err    error
		Denied bool
	}
)

// Event is one Kubernetes event about a VM, its instance or its launcher Pod.
type Event struct {
	Type, Reason, Message, Object string
	Last                          time.Time
	Count                         int32
}

// Source watches what the dashboard shows (list, then watch, through informers: never polling)
// and sends it to the program. Its watches run until replaced or until Stop; after Stop it starts
// none.
type Source struct {
	c    client.WithWatch
	send func(tea.Msg)

	mu                sync.Mutex
	list, events      func() // stop the current watch and wait for it
	listGen, eventGen int    // the generation of the request each carries out
	stopped           bool
	conn              connState
}

// NewSource is a Source reading through c and sending to send (the program's Send).
func NewSource(c client.WithWatch, send func(tea.Msg)) *Source {
	s := &Source{c: c, send: send}
	s.conn.send = send
	return s
}

// Watch replaces the list watch with one of namespace ("" for all), unless this request (gen) or a
// later one was already carried out; it returns at once.
func (s *Source) Watch(gen int, namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || gen <= s.listGen {
		return
	}
	s.listGen = gen
	if s.list != nil {
		s.list()
	}
	s.list = start(func(ctx context.Context) { s.watchList(ctx, namespace) })
}

// WatchEvents replaces the events watch with one for the objects named names in namespace (none:
// it only ends), unless this request (gen) or a later one was already carried out.
func (s *Source) WatchEvents(gen int, namespace string, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || gen <= s.eventGen {
		return
	}
	s.eventGen = gen
	if s.events != nil {
		s.events()
		s.events = nil
	}
	if len(names) > 0 {
		s.events = start(func(ctx context.Context) { s.watchEvents(ctx, namespace, names) })
	}
}

// Stop ends every watch and waits for them; later requests are ignored.
func (s *Source) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, stop := range []func(){s.list, s.events} {
		if stop != nil {
			stop()
		}
	}
	s.list, s.events, s.stopped = nil, nil, true
}

// start runs run in a goroutine; the function returned cancels it and waits for it to return.
func start(run func(context.Context)) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	return func() { cancel(); <-done }
}

// The informers' names: the resources they list (and the connection state's keys).
const (
	resVMs    = "virtualmachines"
	resVMIs   = "virtualmachineinstances"
	resSets   = "virtualmachineinstancereplicasets"
	resEvents = "events"
)

// watchList sends a SnapshotMsg after each burst of changes to the VMs, instances and replica
// sets of namespace, until ctx ends.
func (s *Source) watchList(ctx context.Context, namespace string) {
	defer s.conn.forget(resVMs, resVMIs, resSets)
	vms := s.informer(ctx, resVMs, namespace, &virtv1.VirtualMachine{}, func() client.ObjectList { return &virtv1.VirtualMachineList{} })
	vmis := s.informer(ctx, resVMIs, namespace, &virtv1.VirtualMachineInstance{}, func() client.ObjectList { return &virtv1.VirtualMachineInstanceList{} })
	sets := s.informer(ctx, resSets, namespace, &virtv1.VirtualMachineInstanceReplicaSet{},
		func() client.ObjectList { return &virtv1.VirtualMachineInstanceReplicaSetList{} })
	// Only the VMs must be listed before the first snapshot: a kind the user may not list (or
	// that lists slowly) leaves its view empty rather than the whole dashboard.
	s.runInformers(ctx, vms.HasSynced, func() {
		vmList := itemsOf[virtv1.VirtualMachine](vms)
		vmiList := itemsOf[virtv1.VirtualMachineInstance](vmis)
		s.send(SnapshotMsg{Namespace: namespace, VMs: Rows(vmList, vmiList), VMIs: InstanceRows(vmiList),
			ReplicaSets: ReplicaSetRows(itemsOf[virtv1.VirtualMachineInstanceReplicaSet](sets))})
	}, vms, vmis, sets)
}

// watchEvents sends an EventsMsg after each burst of events about the objects named names in
// namespace (a VM, its instance, its launcher Pod), until ctx ends.
func (s *Source) watchEvents(ctx context.Context, namespace string, names []string) {
	defer s.conn.forget(resEvents)
	events := s.informer(ctx, resEvents, namespace, &corev1.Event{}, func() client.ObjectList { return &corev1.EventList{} })
	s.runInformers(ctx, events.HasSynced, func() {
		s.send(EventsMsg{Key: namespace + "/" + names[0], Events: eventsAbout(itemsOf[corev1.Event](events), names)})
	}, events)
}

// runInformers runs the informers until ctx ends, calling snapshot once synced reports true and
// after each burst of changes; it returns once they have stopped.
func (s *Source) runInformers(ctx context.Context, synced toolscache.InformerSynced, snapshot func(), infs ...toolscache.SharedIndexInformer) {
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, inf := range infs {
		// Registering a handler and an error handler fails only on a started informer; these are new.
		_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { notify() }, UpdateFunc: func(any, any) { notify() }, DeleteFunc: func(any) { notify() },
		})
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced) {
		return // ctx ended first
	}
	notify()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		select { // gather a burst
		case <-ctx.Done():
			return
		case <-time.After(coalesce):
		}
		snapshot()
	}
}

// informer lists and watches one kind through c, reporting each list or watch call's outcome
// as the connection's state under name.
func (s *Source) informer(ctx context.Context, name, namespace string, example client.Object, newList func() client.ObjectList) toolscache.SharedIndexInformer {
	report := func(err error) {
		if ctx.Err() == nil && (err == nil || !normalWatchEnd(err)) {
			s.conn.set(name, err)
		}
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := newList()
			err := s.c.List(ctx, list, client.InNamespace(namespace), &client.ListOptions{Raw: &opts})
			report(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			// The reflector retries a refused watch by itself, without its error handler: this is
			// where an apiserver that is down shows.
			w, err := s.c.Watch(ctx, newList(), client.InNamespace(namespace), &client.ListOptions{Raw: &opts})
			report(err)
			return w, err
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, example, 0, toolscache.Indexers{})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) { report(err) })
	return inf
}

// normalWatchEnd reports errors that end a watch without any loss of connection: the server
// closing it, or an expired resource version (the reflector lists again).
func normalWatchEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// connState is the watches' connection: disconnected while any of them last failed (or denied
// while one may not list its kind). It sends a ConnMsg when that changes.
type connState struct {
	mu    sync.Mutex
	send  func(tea.Msg)
	errs  map[string]error
	shown string
}

// set records the outcome of a watch's last call (nil: it succeeded).
func (c *connState) set(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errs == nil {
		c.errs = map[string]error{}
	}
	if err == nil {
		delete(c.errs, name)
	} else {
		c.errs[name] = err
	}
	c.publish()
}

// forget drops the state of watches that have stopped.
func (c *connState) forget(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		delete(c.errs, n)
	}
	c.publish()
}

// publish sends the first failing watch's error (by name), if that changed.
func (c *connState) publish() {
	var msg ConnMsg
	if names := slices.Sorted(maps.Keys(c.errs)); len(names) > 0 {
		msg.Err = c.errs[names[0]]
		msg.Denied = apierrors.IsForbidden(msg.Err) || apierrors.IsUnauthorized(msg.Err)
	}
	shown := ""
	if msg.Err != nil {
		shown = msg.Err.Error()
	}
	if shown != c.shown {
		c.shown = shown
		c.send(msg)
	}
}

// eventsAbout picks the events about the objects named names (a VM, instance or replica set, and
// the launcher Pod), the most recent recentEvents, oldest first.
func eventsAbout(all []corev1.Event, names []string) []Event {
	var out []Event
	for _, e := range all {
		o := e.InvolvedObject
		if !slices.Contains(names, o.Name) {
			continue
		}
		ev := Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Object: o.Kind + "/" + o.Name, Last: e.LastTimestamp.Time, Count: e.Count}
		if e.Series != nil { // events.k8s.io events: the series holds the count and the last time
			ev.Count, ev.Last = e.Series.Count, e.Series.LastObservedTime.Time
		}
		if ev.Last.IsZero() {
			ev.Last = e.EventTime.Time
		}
		if ev.Last.IsZero() {
			ev.Last = e.CreationTimestamp.Time
		}
		out = append(out, ev)
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.Last.Compare(b.Last) })
	if len(out) > recentEvents {
		out = out[len(out)-recentEvents:]
	}
	return out
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
