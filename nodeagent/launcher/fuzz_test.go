package launcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/corpus"
	"github.com/podvirt/podvirt/nodeagent/launcher/qemucaps"
)

// The request kinds FuzzDecodeRequest reaches, by its first argument.
const (
	fuzzSync = iota
	fuzzShutdown
	fuzzMigrate
	fuzzKinds
)

// FuzzDecodeRequest feeds any body to the launcher's request decoding and checks (seeded with the
// API corpus as sync requests): a body that does not decode is answered 400 with an Error naming
// it; a sync is accepted only for this launcher's instance with names that are no paths, and
// capability files only under their directory; a shutdown's grace period is within
// [0, virtv1.MaxGracePeriodSeconds] and never a negative duration; a migration's uid is bounded.
// `make fuzz` runs it for minutes; `go test` runs the seeds.
func FuzzDecodeRequest(f *testing.F) {
	specs, err := corpus.InstanceSpecs("../../api/v1/testdata/corpus")
	if err != nil {
		f.Fatal(err)
	}
	for _, spec := range specs {
		vmi := []byte(`{"metadata":{"namespace":"tenant","name":"vm"},"spec":` + string(spec) + `}`)
		body, err := json.Marshal(launcherv1.SyncRequest{VMI: vmi, QemuCapabilities: map[string][]byte{"x86_64.xml": []byte("<qemuCaps/>")}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(fuzzSync), body)
	}
	f.Add(uint8(fuzzShutdown), []byte(`{"gracePeriodSeconds":30}`))
	f.Add(uint8(fuzzShutdown), []byte(`{"gracePeriodSeconds":4611686018427387904}`))
	f.Add(uint8(fuzzMigrate), []byte(`{"uid":"5c4b2f0e-2b1a-4f6e-9d1c-0a8b7c6d5e4f","bandwidthMiBps":64}`))
	f.Add(uint8(fuzzMigrate), []byte(`{"uid":""}`))
	g := &guest{cfg: &Config{Namespace: "tenant", VMIName: "vm"}}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		var err error
		switch kind % fuzzKinds {
		case fuzzSync:
			var req launcherv1.SyncRequest
			if !decode(w, r, &req) {
				break
			}
			var vmi *virtv1.VirtualMachineInstance
			if vmi, err = g.parseVMI(req); err == nil {
				checkSync(t, vmi, req)
			}
		case fuzzShutdown:
			var req launcherv1.ShutdownRequest
			if !decode(w, r, &req) {
				break
			}
			grace, gerr := shutdownGrace(req)
			if err = gerr; err == nil && (grace < 0 || req.GracePeriodSeconds > virtv1.MaxGracePeriodSeconds) {
				t.Fatalf("grace period %d accepted as %s", req.GracePeriodSeconds, grace)
			}
		case fuzzMigrate:
			var req launcherv1.MigrateRequest
			if !decode(w, r, &req) {
				break
			}
			if err = validMigrate(req); err == nil && (req.UID == "" || len(req.UID) > maxMigrationUID) {
				t.Fatalf("migration uid of %d bytes accepted", len(req.UID))
			}
		}
		if err != nil && !errors.Is(err, errBadRequest) {
			t.Fatalf("refused without errBadRequest (it would be answered 500): %v", err)
		}
		if w.Code != http.StatusOK { // decode answered itself
			var e launcherv1.Error
			if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.HasPrefix(e.Message, "body: ") {
				t.Fatalf("an undecodable body was answered %d %q", w.Code, w.Body.String())
			}
		}
	})
}

// checkSync holds what a sync the launcher accepted may reach: its own instance, names that are
// no paths, capability files in their directory.
func checkSync(t *testing.T, vmi *virtv1.VirtualMachineInstance, req launcherv1.SyncRequest) {
	t.Helper()
	if vmi.Namespace != "tenant" || vmi.Name != "vm" {
		t.Fatalf("a sync of %s/%s accepted by the launcher of tenant/vm", vmi.Namespace, vmi.Name)
	}
	if errs := vmi.Spec.NameErrors(field.NewPath("spec")); len(errs) > 0 {
		t.Fatalf("a sync with names that are paths accepted: %v", errs)
	}
	for name := range req.QemuCapabilities {
		if !qemucaps.ValidName(name) {
			continue
		}
		if p := filepath.Join("/caps", name); filepath.Dir(p) != "/caps" {
			t.Fatalf("capabilities file %q accepted: it lands at %s", name, p)
		}
	}
}
