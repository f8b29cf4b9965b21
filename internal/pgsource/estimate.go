package pgsource

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/highwater-dev/highwater/watermark"
)

// EstimateRows is the planner's estimate of the rows of rng: the plan rows
// of the first page's query without its LIMIT, plus those of the NULL
// phase when rng takes it. It costs an EXPLAIN, not a count, so it is only
// a guess (as good as the table's statistics) for a progress display.
func (sc *Scanner) EstimateRows(ctx context.Context, rng watermark.Interval) (int64, error) {
	phases := []bool{false}
	if rng.IncludeNull {
		phases = append(phases, true)
	}
	var total int64
	for _, nullPhase := range phases {
		sql, args, _ := sc.pageSQL(rng, nil, nullPhase, 1, false)
		sql = strings.TrimSuffix(sql, "\nLIMIT 1")
		var raw []byte
		if err := sc.src.conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
			return 0, sc.src.classify("estimate rows", err)
		}
		var plans []struct {
			Plan struct {
				Rows float64 `json:"Plan Rows"`
			}
		}
		if err := json.Unmarshal(raw, &plans); err != nil || len(plans) == 0 {
			continue
		}
		total += int64(plans[0].Plan.Rows)
	}
	return total, nil
}
