package uselite

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/embed"
)

func TestParseWeights(t *testing.T) {
	shard := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))
	shard = binary.LittleEndian.AppendUint32(shard, math.Float32bits(-2))
	shard = binary.LittleEndian.AppendUint32(shard, uint32(128))
	manifest := `{"weightsManifest":[{"paths":["s1"],"weights":[
		{"name":"w","shape":[2],"dtype":"float32"},{"name":"n","shape":[],"dtype":"int32"}]}]}`
	read := func(name string) ([]byte, error) {
		if name != "s1" {
			return nil, os.ErrNotExist
		}
		return shard, nil
	}
	w, err := parseWeights([]byte(manifest), read)
	if err != nil {
		t.Fatal(err)
	}
	if got := w["w"].f32; len(got) != 2 || got[0] != 1.5 || got[1] != -2 {
		t.Errorf("w = %v, want [1.5 -2]", got)
	}
	if got := w["n"].i32; len(got) != 1 || got[0] != 128 {
		t.Errorf("n = %v, want [128]", got)
	}
	for name, bad := range map[string]string{
		"not JSON":          `{`,
		"no manifest":       `{}`,
		"escaping path":     `{"weightsManifest":[{"paths":["../s1"],"weights":[]}]}`,
		"too big":           `{"weightsManifest":[{"paths":["s1"],"weights":[{"name":"w","shape":[4],"dtype":"float32"}]}]}`,
		"bytes left over":   `{"weightsManifest":[{"paths":["s1"],"weights":[{"name":"w","shape":[2],"dtype":"float32"}]}]}`,
		"unsupported dtype": `{"weightsManifest":[{"paths":["s1"],"weights":[{"name":"w","shape":[3],"dtype":"float16"}]}]}`,
		"quantized":         `{"weightsManifest":[{"paths":["s1"],"weights":[{"name":"w","shape":[3],"dtype":"float32","quantization":{"dtype":"uint8"}}]}]}`,
		"negative shape":    `{"weightsManifest":[{"paths":["s1"],"weights":[{"name":"w","shape":[-1,-3],"dtype":"float32"}]}]}`,
	} {
		if _, err := parseWeights([]byte(bad), read); !errors.Is(err, ErrCorruptModel) {
			t.Errorf("%s: error %v, want ErrCorruptModel", name, err)
		}
	}
	if _, err := newModel(w); !errors.Is(err, ErrCorruptModel) || !strings.Contains(err.Error(), "Embeddings_en") {
		t.Errorf("newModel without the network's weights: %v, want ErrCorruptModel naming the missing weight", err)
	}
}

func TestNewReportsTheModelDirectory(t *testing.T) {
	if _, err := New(Config{MaxChars: -1}, nil); !errors.Is(err, embed.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxChars") {
		t.Errorf("New with a negative MaxChars: %v, want embed.ErrInvalidConfig naming MaxChars", err)
	}
	empty := t.TempDir()
	if _, err := New(Config{ModelDir: empty}, nil); !errors.Is(err, ErrModelNotFound) || !strings.Contains(err.Error(), "vocab.json") {
		t.Errorf("New on an empty directory: %v, want ErrModelNotFound naming vocab.json", err)
	}
	if err := os.WriteFile(filepath.Join(empty, "vocab.json"), []byte(`[["a",0]]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{ModelDir: empty}, nil); !errors.Is(err, ErrCorruptModel) || !strings.Contains(err.Error(), "vocab.json") {
		t.Errorf("New with a short vocab.json: %v, want ErrCorruptModel naming vocab.json", err)
	}
}

func FuzzParseModel(f *testing.F) {
	f.Add([]byte(`{"weightsManifest":[{"paths":["s"],"weights":[{"name":"module/Embeddings_en","shape":[1,256],"dtype":"float32"}]}]}`), make([]byte, 1024))
	f.Add([]byte(`{"weightsManifest":[{"paths":["s","s"],"weights":[{"name":"x","shape":[2,3],"dtype":"int32"}]}]}`), make([]byte, 12))
	f.Add([]byte(`{"weightsManifest":[{"paths":["s"],"weights":[{"name":"x","shape":[4611686018427387904,4],"dtype":"float32"}]}]}`), make([]byte, 16))
	f.Fuzz(func(t *testing.T, manifest, shard []byte) {
		w, err := parseWeights(manifest, func(string) ([]byte, error) { return shard, nil })
		if err != nil {
			if !errors.Is(err, ErrCorruptModel) {
				t.Fatalf("error %v does not wrap ErrCorruptModel", err)
			}
			return
		}
		if _, err := newModel(w); err != nil && !errors.Is(err, ErrCorruptModel) {
			t.Fatalf("newModel error %v does not wrap ErrCorruptModel", err)
		}
	})
}
