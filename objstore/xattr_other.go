//go:build !linux

package objstore

import "errors"

func setXattr(path, attr string, value []byte) error { return errors.ErrUnsupported }

func getXattr(path, attr string) ([]byte, error) { return nil, errors.ErrUnsupported }
