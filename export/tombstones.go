package export

import "github.com/highwater-dev/highwater/manifest"

// deletesChangedFix says what to do when a model's tombstones would come
// from elsewhere than its committed files' did.
const deletesChangedFix = "turning a soft-delete column or the delete log on or off changes which deletes the lake holds, so the files already committed would keep rows deleted since: rerun with --full-refresh to export it anew"

// deletesChanged reports whether only where tombstones come from differs
// between the committed identity and the run's.
func deletesChanged(old, id manifest.Identity) bool {
	if old.SoftDelete == id.SoftDelete && old.DeleteLog == id.DeleteLog {
		return false
	}
	old.SoftDelete, old.DeleteLog = id.SoftDelete, id.DeleteLog
	return old.Diff(id) == ""
}
