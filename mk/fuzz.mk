# Go native fuzzing of what hostile input reaches first. `go test` alone runs every target's seeds
# (api/v1/testdata/corpus, and any crasher committed under the package's testdata/fuzz) as a test;
# `make fuzz` searches for FUZZTIME per target, `make test` for FUZZ_SHORT per target.
FUZZ_TARGETS := \
	./controllers/podtemplate:FuzzRenderPod \
	./nodeagent/launcher/domainxml:FuzzBuild \
	./apiserver/admission:FuzzValidateInstanceSpec \
	./api/launcher/v1:FuzzBounded \
	./apiserver:FuzzReadBody
FUZZTIME ?= 10m
FUZZ_SHORT ?= 15s

.PHONY: fuzz
fuzz: ## Fuzz every target for FUZZTIME (10m) each; a crasher lands in the package's testdata/fuzz: fix it and commit it as a regression test
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
	  flock -o /tmp/podvirt-heavy.lock go test -short -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg; done

.PHONY: fuzz-short
fuzz-short: ## The short fuzz pass of make test (FUZZ_SHORT, 15s, per target)
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SHORT)
