package synth

import "github.com/highwater-dev/highwater/internal/objstore"

var objstoreOpts = objstore.PutOptions{ContentType: "application/vnd.apache.parquet"}
