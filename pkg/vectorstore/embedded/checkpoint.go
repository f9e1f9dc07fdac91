package embedded

import (
	"context"
	"errors"
	"os"
	"time"

	"go.uber.org/zap"
)

// DefaultCheckpointInterval is Config.CheckpointInterval's default. Why a
// second: under a steady stream of writes every checkpoint copies the index leaves
// that the commits since the last one touched (random UUIDs, the ids then, reached
// most leaves of the id index), so the copying falls with the interval; going from
// 250 ms to 1 s cut a batched upsert's CPU, checkpoints included, by about a
// tenth. The WAL bound (WALRestartPages) still caps the file between checkpoints.
const DefaultCheckpointInterval = time.Second

// DefaultWALRestartPages is Config.WALRestartPages' default: 64 MiB of
// WAL (pageBytes pages). Why the bound needs a pause: a checkpoint running beside
// the writers never catches up with them, and SQLite starts the WAL file over only
// when a write begins with every frame copied, so without one the file would grow
// for as long as writes keep coming. Why 64 MiB: each pause stalls the writers,
// and the ingest pipeline behind them; at 16 MiB its ~40 MiB of frames a second
// made one a second, and BenchmarkIngest (60,000 observations) was ~3% slower in
// each of six interleaved pairs. The price is a WAL file of 64 MiB kept on disk
// (journal_size_limit cuts it back to that at each restart) while the store is
// open, and up to about twice that during a burst of writes, while the
// checkpointer catches up (maxCatchUpWAL).
const DefaultWALRestartPages = 64 << 20 / pageBytes

// walPageBytes is a WAL frame's size: a page and the frame header; it turns
// WALRestartPages into the file size journal_size_limit takes.
const walPageBytes = pageBytes + 24

// startCheckpoints starts the goroutine that checkpoints the WAL every
// CheckpointInterval, and as soon as the WAL is past its bound (wakeIfWALFull);
// Close stops it.
//
// Why not SQLite's automatic checkpoint: it runs inside the commit that crosses
// 1,000 WAL pages, under writeMu, copying the pages and fsyncing the database file
// while every other write waits; it took about half of a batched upsert's time. A
// PASSIVE checkpoint on its own connection copies the same pages while writers go
// on appending to the WAL, and one every interval copies a page written by many
// commits (an index leaf) once.
func (s *backend) startCheckpoints() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopCheckpoints, s.checkpointsDone = cancel, make(chan struct{})
	go func() {
		defer close(s.checkpointsDone)
		t := time.NewTicker(s.cfg.CheckpointInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-s.walFull:
			}
			if !s.uncheckpointed.Swap(false) {
				continue
			}
			s.checkpointMu.Lock()
			err := s.checkpoint(ctx)
			s.checkpointMu.Unlock()
			if err != nil && ctx.Err() == nil {
				// Nothing is lost: the frames stay in the WAL until a checkpoint succeeds.
				s.uncheckpointed.Store(true)
				s.logger.Warn("checkpointing the WAL", zap.Error(err))
			}
		}
	}()
}

// Checkpoint copies every committed write into the database file and empties the
// WAL, holding this store's writes meanwhile, so that the file alone holds the
// data: before copying it elsewhere, or to measure it (agentmem bench's bytes per
// memory, which counted a WAL of whatever length the last checkpoint left). A
// MemoryPath store has nothing to copy.
func (s *backend) Checkpoint(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if s.cfg.Path == MemoryPath {
		return nil
	}
	s.checkpointMu.Lock()
	defer s.checkpointMu.Unlock()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	busy, _, _, err := s.walCheckpoint(ctx, "TRUNCATE")
	if err != nil {
		return err
	}
	if busy {
		// The busy handler waited BusyTimeout for a reader still on the WAL.
		return s.Wrap("checkpoint", errors.New("a reader kept the WAL in use"))
	}
	return nil
}

// checkpoint copies the committed WAL frames into the database file beside the
// writers and, once the WAL is longer than WALRestartPages, copies the rest with
// writes held, so that the next write starts the WAL over.
//
// Before it holds the writes, it catches up beside them. A pass copies the frames
// that were in the WAL when it began; the writers append more meanwhile, about as
// many as the pass took time, so the passes shrink until one copies at most
// catchUpFrames, and the pass that holds the writes then copies only the few
// appended during that one. Measured in agentmem bench's ingest phase: holding the
// writes right after the first pass (a second of the pipeline's frames, ~9,000)
// left ~1,000 frames for the held pass, 30-60 ms with every write waiting, once a
// second; catching up first leaves 0-15 ms.
func (s *backend) checkpoint(ctx context.Context) error {
	frames, copied, err := s.checkpointPassive(ctx)
	if err != nil || frames < s.cfg.WALRestartPages {
		return err
	}
	// Writers as fast as the copying would never let it catch up, and a burst of
	// writes grows the WAL while it tries: after maxCatchUpPasses, or once the WAL
	// is maxCatchUpWAL times its bound, the writes are held anyway.
	for pass, last := 0, copied; last > catchUpFrames && frames < maxCatchUpWAL*s.cfg.WALRestartPages && pass < maxCatchUpPasses; pass++ {
		before := copied
		if frames, copied, err = s.checkpointPassive(ctx); err != nil {
			return err
		}
		// Less than before when a write started the WAL over in between.
		last = copied - before
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_, _, err = s.checkpointPassive(ctx)
	return err
}

// wakeIfWALFull wakes the checkpointer, after a commit, when the WAL is longer
// than its bound. Why not wait for the interval: a burst of writes grows the WAL
// by its bound several times over in one interval (the 100,000-memory load of
// agentmem bench, ~30,000 records a second, took it to 142–285 MiB against 64).
// Why the file's size tells: journal_size_limit cuts the file back to the bound
// when the writes start the WAL over, so it is longer than the bound only while
// the WAL is. It costs a stat per transaction.
func (s *backend) wakeIfWALFull() {
	if s.walPath == "" {
		return // MemoryPath: no WAL
	}
	fi, err := os.Stat(s.walPath)
	if err != nil || fi.Size() <= int64(s.cfg.WALRestartPages)*walPageBytes {
		return
	}
	select {
	case s.walFull <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// catchUpFrames is how many frames the last pass beside the writers copies at
// most before checkpoint holds them (2 MiB of pages: a few milliseconds);
// maxCatchUpPasses and maxCatchUpWAL bound the catching up, in passes and in
// WALRestartPages.
const (
	catchUpFrames    = 256
	maxCatchUpPasses = 8
	maxCatchUpWAL    = 2
)

// checkpointPassive runs one PASSIVE checkpoint and returns the WAL's length and
// how many of its frames are in the database file, both in frames.
func (s *backend) checkpointPassive(ctx context.Context) (walFrames, copied int, err error) {
	_, walFrames, copied, err = s.walCheckpoint(ctx, "PASSIVE")
	return walFrames, copied, err
}

// walCheckpoint runs PRAGMA wal_checkpoint in mode and returns its row: whether it
// could not finish for a reader or writer (busy), the WAL's length and how many of
// its frames are in the database file.
func (s *backend) walCheckpoint(ctx context.Context, mode string) (busy bool, walFrames, copied int, err error) {
	var b int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&b, &walFrames, &copied); err != nil {
		return false, 0, 0, s.Wrap("checkpoint", err)
	}
	return b != 0, walFrames, copied, nil
}

// Snapshot writes a consistent copy of the database, every committed write in
// it, to the new file path (SQLite's VACUUM INTO), with writes held so that the
// copy matches the partitions in memory; reads go on. A backup of the store
// while it is open.
func (s *Store) Snapshot(ctx context.Context, path string) error {
	b := s.b
	if err := b.checkOpen(); err != nil {
		return err
	}
	if b.cfg.Path == MemoryPath {
		return b.Wrap("snapshot", errors.New("an in-memory store has no file to copy"))
	}
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	if _, err := b.db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return b.Wrap("snapshot", err)
	}
	return nil
}
