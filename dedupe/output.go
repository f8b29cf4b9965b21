package dedupe

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/highwater-dev/highwater/formats"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/progress"
	"github.com/highwater-dev/highwater/manifest"
	"github.com/highwater-dev/highwater/watermark"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// outputs writes the winners of one bucket at a time into files of one
// schema, each streamed to the store while it is encoded. Its row groups
// are encoded by a pool of encoders shared by every bucket being rewritten
// (up to window at once for this one, as many as their bytes in the gate
// allow), and committed to the file in order, so that one bucket uses every
// core.
type outputs struct {
	ctx      context.Context
	bucket   objstore.Bucket
	log      *manifest.Log
	schema   *parquet.Schema
	schemaID string
	codec    compress.Codec
	kv       map[string]string
	build    formats.Build
	runID    string
	attempt  string
	seq      *atomic.Int64 // numbers the files of all workers
	target   int64
	rowGroup int64 // raw bytes of one row group
	modKind  watermark.Kind
	enc      *encoders
	window   int   // row groups handed to the encoders at once
	gate     *gate // the bytes of the row groups in flight, of every bucket
	// maxGroups rolls a file at that many row groups: the writer holds
	// every row group's metadata (and page indexes) until the footer.
	maxGroups int
	files     []manifest.File
	bytesOut  int64
	rowsOut   int64
	progress  *progress.Counter
	part      *outPart
	partOf    int      // the bucket of part
	fill      *rgJob   // the row group being filled
	pending   []*rgJob // handed to the encoders, in file order
	spare     []*rgJob
	// inFlight is the most row groups that were being encoded at once.
	inFlight int
}

type outPart struct {
	file     manifest.File
	up       *objstore.Upload
	w        *formats.FileWriter
	min, max int64
	anyMod   bool
	// sizes[i] is the file's size once its row groups up to i are
	// committed; handed counts the row groups handed to the encoders.
	sizes  []int64
	handed int
}

// rgJob is one row group on its way through an encoder: the rows as
// records hold them, back to back.
type rgJob struct {
	part     *outPart
	rg       *formats.RowGroup
	data     []byte
	offs     []int // offs[i] is where row i begins in data
	min, max int64
	anyMod   bool
	charge   int64 // bytes taken from the gate
	done     chan error
}

// encoders shred and compress row groups, as many at once as there are
// workers, for every bucket being rewritten.
type encoders struct {
	jobs chan *rgJob
	wg   sync.WaitGroup
}

func startEncoders(n int) *encoders {
	e := &encoders{jobs: make(chan *rgJob, n)}
	for range n {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			var rows []parquet.Row
			for j := range e.jobs {
				var err error
				rows, err = j.encode(rows)
				j.done <- err
			}
		}()
	}
	return e
}

// stop waits for the encoders to finish; no job may be handed out after.
func (e *encoders) stop() {
	close(e.jobs)
	e.wg.Wait()
}

const batchRows = 256

// encode writes the job's rows into its row group, batchRows at a time,
// and compresses the last pages. rows is reused from job to job.
func (j *rgJob) encode(rows []parquet.Row) ([]parquet.Row, error) {
	for first := 0; first < len(j.offs); first += batchRows {
		rows = rows[:0]
		for i := first; i < min(first+batchRows, len(j.offs)); i++ {
			end := len(j.data)
			if i+1 < len(j.offs) {
				end = j.offs[i+1]
			}
			var row parquet.Row
			if len(rows) < cap(rows) {
				row = rows[:len(rows)+1][len(rows)][:0]
			}
			row, err := decodeRow(row, j.data[j.offs[i]:end])
			if err != nil {
				return rows, err
			}
			rows = append(rows, row)
		}
		if _, err := j.rg.WriteRows(rows); err != nil {
			return rows, fmt.Errorf("write %s: %w", j.part.file.Key, err)
		}
	}
	if err := j.rg.Flush(); err != nil {
		return rows, fmt.Errorf("write %s: %w", j.part.file.Key, err)
	}
	return rows, nil
}

// add queues one winning record for the given bucket's current file.
func (o *outputs) add(bucket int, rec []byte) error {
	if o.part == nil {
		if err := o.open(bucket); err != nil {
			return err
		}
	}
	row := recRow(rec)
	// A row group never holds more than rowGroup bytes, but for one row
	// wider than that alone: the gate's room is counted in them.
	if j := o.fill; j != nil && len(j.offs) > 0 && int64(len(j.data)+len(row)) > o.rowGroup {
		if err := o.submit(); err != nil {
			return err
		}
	}
	j := o.fill
	if j == nil {
		if n := len(o.spare); n > 0 {
			j, o.spare = o.spare[n-1], o.spare[:n-1]
		} else {
			j = &rgJob{done: make(chan error, 1)}
		}
		o.fill = j
	}
	if recFlags(rec)&flagModNull == 0 {
		m := recMod(rec)
		if !j.anyMod || m < j.min {
			j.min = m
		}
		if !j.anyMod || m > j.max {
			j.max = m
		}
		j.anyMod = true
	}
	j.offs = append(j.offs, len(j.data))
	j.data = append(j.data, row...)
	if int64(len(j.data)) >= o.rowGroup {
		return o.submit()
	}
	return nil
}

// rowGroupCharge is what a row group of raw record bytes holds until it
// is appended to its file: the records, and as much again for its encoded
// pages and the encoders' page buffers (zstd does not make incompressible
// pages smaller).
func rowGroupCharge(raw int64) int64 { return 2 * raw }

// submit hands the filled row group to the encoders, once the gate has
// room for it; while it has none, the bucket's own oldest row groups are
// committed first, and only a bucket with nothing in flight waits for
// others. The file rolls when all but the last window-1 row groups handed
// out reach the target (so a file passes it by at most window-1 row
// groups), or at maxGroups row groups. Both are points of the sequence of
// row groups, not of the encoders' progress, so the files come out the
// same however fast the encoders are and whatever the gate let through.
func (o *outputs) submit() error {
	j := o.fill
	if j == nil {
		return nil
	}
	o.fill = nil
	// After another bucket's error, stop within a row group.
	if err := o.ctx.Err(); err != nil {
		o.recycle(j)
		return err
	}
	for len(o.pending) >= o.window {
		if err := o.commitOldest(); err != nil {
			o.recycle(j)
			return err
		}
	}
	if o.rolls() {
		err := o.drain()
		if err == nil {
			err = o.closePart()
		}
		if err == nil {
			err = o.open(o.partOf)
		}
		if err != nil {
			o.recycle(j)
			return err
		}
	}
	j.charge = rowGroupCharge(int64(len(j.data)))
	for !o.gate.tryAcquire(j.charge) {
		if len(o.pending) == 0 {
			o.gate.acquire(j.charge)
			break
		}
		if err := o.commitOldest(); err != nil {
			j.charge = 0
			o.recycle(j)
			return err
		}
	}
	p := o.part
	p.handed++
	j.part, j.rg = p, formats.BeginRowGroup(p.w)
	if j.anyMod {
		if !p.anyMod || j.min < p.min {
			p.min = j.min
		}
		if !p.anyMod || j.max > p.max {
			p.max = j.max
		}
		p.anyMod = true
	}
	o.pending = append(o.pending, j)
	o.inFlight = max(o.inFlight, len(o.pending))
	o.enc.jobs <- j
	return nil
}

// rolls says whether the next row group starts a new file. Row groups are
// committed whole, so a size after a commit is the bytes written.
func (o *outputs) rolls() bool {
	p := o.part
	if p.handed >= o.maxGroups {
		return true
	}
	k := p.handed - (o.window - 1) // the row groups the rule looks at
	return k > 0 && p.sizes[k-1] >= o.target
}

// commitOldest waits for the oldest row group in flight and appends it to
// its file.
func (o *outputs) commitOldest() error {
	j := o.pending[0]
	o.pending = o.pending[1:]
	defer o.recycle(j)
	if err := <-j.done; err != nil {
		return err
	}
	if err := j.rg.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", j.part.file.Key, err)
	}
	j.part.file.Rows += int64(len(j.offs))
	j.part.sizes = append(j.part.sizes, j.part.w.EstimatedSize())
	return nil
}

func (o *outputs) drain() error {
	for len(o.pending) > 0 {
		if err := o.commitOldest(); err != nil {
			return err
		}
	}
	return nil
}

func (o *outputs) recycle(j *rgJob) {
	o.gate.release(j.charge)
	*j = rgJob{data: j.data[:0], offs: j.offs[:0], done: j.done}
	o.spare = append(o.spare, j)
}

func (o *outputs) open(bucket int) error {
	key := manifest.DataKey(o.runID, o.attempt, int(o.seq.Add(1)))
	up := objstore.NewUpload(o.ctx, o.bucket, o.log.Key(key), objstore.PutOptions{ContentType: formats.ContentType})
	kv := map[string]string{manifest.MetaBucket: fmt.Sprint(bucket)}
	for k, v := range o.kv {
		kv[k] = v
	}
	// Row groups are cut here (submit) and committed whole, so the writer
	// itself bounds none.
	w, err := formats.NewFileWriter(up, o.schema, formats.WriterOptions{Codec: o.codec, KeyValue: kv, Build: o.build})
	if err != nil {
		up.Abort()
		return fmt.Errorf("start %s: %w", key, err)
	}
	b := bucket
	o.part = &outPart{file: manifest.File{Key: key, SchemaID: o.schemaID, Bucket: &b}, up: up, w: w}
	o.partOf = bucket
	return nil
}

// endBucket closes the bucket's last file: files never span buckets.
func (o *outputs) endBucket() error {
	if o.part == nil {
		return nil
	}
	if err := o.submit(); err != nil {
		return err
	}
	if err := o.drain(); err != nil {
		return err
	}
	return o.closePart()
}

func (o *outputs) closePart() error {
	p := o.part
	o.part = nil
	if p.anyMod {
		lo, hi := watermark.Format(o.modKind, watermark.Value(p.min)), watermark.Format(o.modKind, watermark.Value(p.max))
		p.file.MinModifiedAt, p.file.MaxModifiedAt = &lo, &hi
	}
	if err := p.w.Close(); err != nil {
		p.up.Abort()
		return fmt.Errorf("finish %s: %w", p.file.Key, err)
	}
	var err error
	if p.file.Bytes, p.file.SHA256, err = p.up.Close(); err != nil {
		return fmt.Errorf("upload %s: %w", p.file.Key, err)
	}
	o.files = append(o.files, p.file)
	o.bytesOut += p.file.Bytes
	o.rowsOut += p.file.Rows
	o.progress.AddFile(p.file.Bytes)
	return nil
}

// abort stops every upload in flight; the store keeps nothing of them. It
// waits for this bucket's row groups still in the encoders.
func (o *outputs) abort() {
	for _, j := range o.pending {
		<-j.done
		o.gate.release(j.charge)
	}
	o.pending, o.fill = nil, nil
	if o.part != nil {
		o.part.up.Abort()
		o.part = nil
	}
}
