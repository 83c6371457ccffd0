package sweep

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is held (flock) by the one process writing a run directory, for the whole run:
// the sweep, the report, everything. It holds that process's PID while held and is emptied
// when the holder closes the directory; a PID found in it when the lock is free is a holder
// that died without closing (kill -9, a crash, a lost node), and the lock is taken over.
const LockFile = ".lock"

// ErrLocked is wrapped by LockedError.
var ErrLocked = errors.New("the run directory is in use")

// LockedError says who holds a run directory.
type LockedError struct {
	Dir string
	PID int // 0 when the holder's PID could not be read
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("another decodebench (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s is in use: %s is writing it; wait for it to end, or stop it and then --resume %s", e.Dir, holder, e.Dir)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// DirLock is a held lock on a run directory.
type DirLock struct {
	Dir string
	// StalePID is the PID a dead holder left in the lock file (0 if none): its run ended
	// without closing the directory.
	StalePID int
	f        *os.File
}

// Lock makes path (and its parents) and takes its lock without waiting: a directory another
// process holds is a *LockedError naming that process.
func Lock(path string) (*DirLock, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(path, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock of %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Dir: path, PID: pid}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	l := &DirLock{Dir: path, f: f}
	if pid := readPID(f); pid > 0 && pid != os.Getpid() {
		l.StalePID = pid
	}
	if err := l.write(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		l.Release()
		return nil, fmt.Errorf("writing the lock of %s: %w", path, err)
	}
	return l, nil
}

func readPID(f *os.File) int {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 64))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0
	}
	return pid
}

func (l *DirLock) write(s string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt([]byte(s), 0); err != nil {
		return err
	}
	return l.f.Sync()
}

// Release empties the lock file (a clean end, not a stale lock) and unlocks it. The file
// stays: removing it would let a process that opened it before the removal lock a file no
// one else sees.
func (l *DirLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	werr := l.write("")
	err := errors.Join(werr, l.f.Close()) // closing the descriptor drops the flock
	l.f = nil
	return err
}

// Holder reports whether another process holds path's lock now, as a *LockedError (nil when
// none does, or path has no lock file). It takes and drops the lock to find out.
func Holder(path string) error {
	f, err := os.OpenFile(filepath.Join(path, LockFile), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return &LockedError{Dir: path, PID: readPID(f)}
	}
	return nil
}
