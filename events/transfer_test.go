package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestTransferRequestsValidate(t *testing.T) {
	state := SessionKV{Kind: SessionKVState, SessionID: "s1", Value: json.RawMessage(`{}`)}
	turn := SessionKV{Kind: SessionKVTurn, SessionID: "s1", TurnID: "t1", Value: json.RawMessage(`{}`)}
	rec := Record{ID: "x", MemoryType: MemoryEpisodic, Text: "a", Vector: []float32{1}}
	good := []interface{ Validate() error }{
		ExportRequest{Part: ExportInfo},
		ExportRequest{Part: ExportRecords, UserID: "u1", Cursor: "abc", Limit: 10},
		ImportRequest{UserID: "u1", FromTenant: "acme", Files: []FileChunk{{Name: "MEMORY.md"}}, Records: []Record{rec}, Sessions: []SessionKV{state, turn}},
		ImportRequest{UserID: "u1", Records: []Record{{ID: "x", MemoryType: MemoryItemType, Text: "a"}}, Reembed: true},
		ForgetRequest{UserID: "u1"},
	}
	for _, r := range good {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	badTurn := turn
	badTurn.Value = json.RawMessage(`{`)
	bad := []struct {
		req  interface{ Validate() error }
		want string
	}{
		{ExportRequest{Part: "everything"}, "part"},
		{ExportRequest{Part: ExportFiles}, "user_id"},
		{ExportRequest{Part: ExportFiles, UserID: "u1", Limit: MaxLimit + 1}, "limit"},
		{ImportRequest{UserID: "u.1"}, "user_id"},
		{ImportRequest{UserID: "u1", FromTenant: "a b"}, "from_tenant"},
		{ImportRequest{UserID: "u1", Files: []FileChunk{{Offset: 1}}}, "files[0].name"},
		{ImportRequest{UserID: "u1", Files: []FileChunk{{Name: "MEMORY.md", Offset: -1}}}, "files[0].offset"},
		{ImportRequest{UserID: "u1", Records: []Record{{ID: "x", MemoryType: MemoryMarkdown}}}, "records[0].memory_type"},
		{ImportRequest{UserID: "u1", Records: []Record{{ID: "x", MemoryType: MemoryEpisodic}}}, "no vector"},
		{ImportRequest{UserID: "u1", Sessions: []SessionKV{{Kind: SessionKVState, SessionID: "s1", TurnID: "t1", Value: json.RawMessage(`{}`)}}}, "turn_id"},
		{ImportRequest{UserID: "u1", Sessions: []SessionKV{badTurn}}, "not JSON"},
		{ImportRequest{UserID: "u1", Records: make([]Record, MaxIDsPerReq+1)}, "at most"},
		{ForgetRequest{}, "user_id"},
	}
	for _, c := range bad {
		err := c.req.Validate()
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want ErrInvalidRequest naming %q", c.req, err, c.want)
		}
	}
}
