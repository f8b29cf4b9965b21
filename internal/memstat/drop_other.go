//go:build !linux

package memstat

import "errors"

// DropFilePages is only available on Linux.
func DropFilePages() (int64, error) {
	return 0, errors.New("drop file pages: not supported on this system")
}
