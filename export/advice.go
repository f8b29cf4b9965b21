package export

import "sync"

// Advice says each warning about a model's table (such as a missing
// index) once per process, however many instances of the model run: a
// model fanned out over a thousand tenants would otherwise repeat it a
// thousand times and bury every other line. Each instance still records it
// in its own commit. The zero value is ready; a nil *Advice says every
// warning.
type Advice struct {
	mu   sync.Mutex
	said map[[2]string]bool
}

// first reports whether msg about model has not been said yet, and marks
// it said.
func (a *Advice) first(model, msg string) bool {
	if a == nil {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := [2]string{model, msg}
	if a.said[k] {
		return false
	}
	if a.said == nil {
		a.said = map[[2]string]bool{}
	}
	a.said[k] = true
	return true
}

// adviseTable records a warning found when the table was discovered, and
// says it unless another instance of the model in this process already
// did. For a tenant the line says that it holds for every tenant.
func (r *runner) adviseTable(msg string) {
	r.warnMu.Lock()
	r.warn = append(r.warn, msg)
	r.warnMu.Unlock()
	if !r.opts.Advice.first(r.opts.Model, msg) {
		return
	}
	if r.opts.Source.Tenant != nil && r.opts.Advice != nil {
		r.logger.Warn(msg + " (said once for every tenant of the model; each tenant's commit records it)")
		return
	}
	r.logger.Warn(msg)
}
