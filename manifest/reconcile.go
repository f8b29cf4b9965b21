package manifest

// Commits of reconcile and reset. They are kept here, apart from the
// kinds of the export and dedupe protocol, so that the rules they add to
// MovesWatermark, Kills and the fold are in one place.

// Kinds of the commits of reconcile and reset.
const (
	// KindReconcile records a comparison of the lake with the source and,
	// with a repair, adds the files that make them equal. It leaves the
	// watermark alone.
	KindReconcile = "reconcile"
	// KindReset moves the watermark backwards on purpose; the next export
	// reads again from there. It is the one commit that may.
	KindReset = "reset"
)

// ReconcileReport is what a reconcile found, as its commit records it.
type ReconcileReport struct {
	// WindowStart and WindowEnd bound the modified-at values judged; nil
	// is open.
	WindowStart *string `json:"window_start,omitempty"`
	WindowEnd   *string `json:"window_end,omitempty"`
	KeysOnly    bool    `json:"keys_only,omitempty"`
	Matched     int64   `json:"matched"`
	Missing     int64   `json:"missing"`
	Extra       int64   `json:"extra"`
	Changed     int64   `json:"changed"`
	// The samples: up to ten keys of each kind, each a literal per key
	// column.
	MissingKeys [][]string `json:"missing_keys"`
	ExtraKeys   [][]string `json:"extra_keys"`
	ChangedKeys [][]string `json:"changed_keys"`
	// Repaired: the commit adds new versions of the missing and changed
	// rows and tombstones of the extra keys (its Added files).
	Repaired bool `json:"repaired,omitempty"`
	// RepairedRows and Tombstones count what the repair wrote.
	RepairedRows int64 `json:"repaired_rows,omitempty"`
	Tombstones   int64 `json:"tombstones,omitempty"`
	// Unrepaired counts keys a repair could not make win (see Warnings).
	Unrepaired int64 `json:"unrepaired,omitempty"`
}

// Equal reports whether the lake was found equal to the source.
func (r *ReconcileReport) Equal() bool {
	return r.Missing == 0 && r.Extra == 0 && r.Changed == 0
}

// ResetReport records a deliberate move of the watermark backwards.
type ResetReport struct {
	OldWatermark *string `json:"old_watermark"`
	NewWatermark string  `json:"new_watermark"`
	// ToSeq is the commit whose watermark was taken, when given by seq.
	ToSeq  int64  `json:"to_seq,omitempty"`
	Reason string `json:"reason"`
	User   string `json:"user"`
	Host   string `json:"host"`
}
