// An instant stand-in for a vLLM 0.33.0 server, for the front data-path benchmark (benchmarks/front/):
// it answers at once, so what a front in front of it costs is all that a run measures.
//
// Roles (-role):
//
//	server   a classic vLLM server: POST /v1/completions and /v1/chat/completions, GET /health, GET /v1/models.
//	prefill  the same, as a MooncakeConnector prefill engine: a completion must carry the kv_transfer_params
//	         {do_remote_decode: true, do_remote_prefill: false, transfer_id} with stream false and max_tokens 1
//	         (what the connector's scheduler reads), and is answered finish_reason "length" (the connector keeps
//	         the KV only for FINISHED_LENGTH_CAPPED); its bootstrap port (-bootstrap) answers GET /query as vLLM
//	         0.33.0's MooncakeBootstrapServer does (mooncake_utils.py; the shape copied from
//	         tests/e2e/pd_standins.py, Prefill.query).
//	decode   a MooncakeConnector decode engine: a completion must carry {do_remote_decode: false,
//	         do_remote_prefill: true, remote_bootstrap_addr, remote_engine_id, transfer_id}, the engine id the
//	         prefill announced (-engine-id) and its bootstrap address (-bootstrap-addr). No KV is pulled.
//
// A completion with "stream": true is answered with max_tokens (default 16) server-sent events, each written
// and flushed on its own as vLLM's engine steps send them, then "data: [DONE]"; otherwise with one small JSON.
// A refused request is answered 422 and counted; GET /stats tells the counts (for the harness's checks).
//
// The standard library only (net/http), so it builds offline.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

type request struct {
	Model     string          `json:"model"`
	Stream    bool            `json:"stream"`
	MaxTokens *int            `json:"max_tokens"`
	Messages  json.RawMessage `json:"messages"`
	KV        map[string]any  `json:"kv_transfer_params"`
}

type standin struct {
	role          string
	engineID      string
	bootstrapAddr string
	workerAddr    string
	answered      atomic.Int64
	refused       atomic.Int64
	mu            sync.Mutex
	lastRefusal   string
}

func (s *standin) refuse(w http.ResponseWriter, why string) {
	s.refused.Add(1)
	s.mu.Lock()
	s.lastRefusal = why
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "stand-in: " + why, "code": 422}})
	w.Write(body)
}

// kvError says what is wrong with a request's kv_transfer_params for this role ("" when nothing is).
func (s *standin) kvError(r *request) string {
	kv := r.KV
	switch s.role {
	case "prefill":
		id, _ := kv["transfer_id"].(string)
		if len(kv) != 3 || kv["do_remote_decode"] != true || kv["do_remote_prefill"] != false || !strings.HasPrefix(id, "xfer-") {
			return fmt.Sprintf("prefill kv_transfer_params %v", kv)
		}
		if r.Stream || r.MaxTokens == nil || *r.MaxTokens != 1 {
			return "a prefill must be stream false, max_tokens 1"
		}
	case "decode":
		id, _ := kv["transfer_id"].(string)
		if len(kv) != 5 || kv["do_remote_decode"] != false || kv["do_remote_prefill"] != true || !strings.HasPrefix(id, "xfer-") {
			return fmt.Sprintf("decode kv_transfer_params %v", kv)
		}
		if kv["remote_engine_id"] != s.engineID || kv["remote_bootstrap_addr"] != s.bootstrapAddr {
			return fmt.Sprintf("decode: engine %v at %v, not %s at %s", kv["remote_engine_id"], kv["remote_bootstrap_addr"], s.engineID, s.bootstrapAddr)
		}
	}
	return ""
}

func (s *standin) completion(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, `{"detail":"Method Not Allowed"}`, http.StatusMethodNotAllowed)
		return
	}
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	var r request
	if err := json.Unmarshal(raw, &r); err != nil {
		s.refuse(w, "not JSON: "+err.Error())
		return
	}
	if why := s.kvError(&r); why != "" {
		s.refuse(w, why)
		return
	}
	s.answered.Add(1)
	chat := req.URL.Path == "/v1/chat/completions"
	tokens := 16
	if r.MaxTokens != nil {
		tokens = *r.MaxTokens
	}
	model, _ := json.Marshal(r.Model)
	if !r.Stream {
		w.Header().Set("Content-Type", "application/json")
		text := strings.Repeat("x", tokens)
		// vLLM's CompletionResponse and ChatCompletionResponse (completion/protocol.py, chat_completion/protocol.py).
		var choice string
		if chat {
			choice = fmt.Sprintf(`{"index":0,"message":{"role":"assistant","content":"%s"},"logprobs":null,"finish_reason":"length","stop_reason":null}`, text)
		} else {
			choice = fmt.Sprintf(`{"index":0,"text":"%s","logprobs":null,"finish_reason":"length","stop_reason":null}`, text)
		}
		kind := "text_completion"
		if chat {
			kind = "chat.completion"
		}
		fmt.Fprintf(w, `{"id":"cmpl-bench","object":"%s","created":1,"model":%s,"choices":[%s],"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d},"kv_transfer_params":null}`,
			kind, model, choice, tokens, tokens+3)
		return
	}
	// Server-sent events as vLLM's StreamingResponse sends them: no length, so chunked, one flush per event.
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for i := 0; i < tokens; i++ {
		finish := "null"
		if i == tokens-1 {
			finish = `"length"`
		}
		if chat {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%s,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"logprobs\":null,\"finish_reason\":%s}]}\n\n", model, finish)
		} else {
			fmt.Fprintf(w, "data: {\"id\":\"cmpl-bench\",\"object\":\"text_completion\",\"created\":1,\"model\":%s,\"choices\":[{\"index\":0,\"text\":\"x\",\"logprobs\":null,\"finish_reason\":%s,\"stop_reason\":null}]}\n\n", model, finish)
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

func (s *standin) stats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	last := s.lastRefusal
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"role": s.role, "answered": s.answered.Load(), "refused": s.refused.Load(), "last_refusal": last})
}

func main() {
	role := flag.String("role", "server", "server, prefill or decode")
	addr := flag.String("addr", "127.0.0.1:0", "the HTTP server's address")
	bootstrap := flag.String("bootstrap", "", "prefill: the bootstrap server's address (GET /query)")
	engineID := flag.String("engine-id", "", "prefill: the engine id /query announces; decode: the one it expects")
	bootstrapAddr := flag.String("bootstrap-addr", "", "decode: the remote_bootstrap_addr it expects (http://host:port)")
	flag.Parse()
	if *role != "server" && *role != "prefill" && *role != "decode" {
		log.Fatalf("unknown role %q", *role)
	}
	s := &standin{role: *role, engineID: *engineID, bootstrapAddr: *bootstrapAddr, workerAddr: "tcp://127.0.0.1:1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", s.completion)
	mux.HandleFunc("/v1/chat/completions", s.completion)
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"bench","object":"model","owned_by":"vllm","max_model_len":4096}]}`)
	})
	mux.HandleFunc("/stats", s.stats)
	if *role == "prefill" {
		if *bootstrap == "" || *engineID == "" {
			log.Fatal("a prefill needs -bootstrap and -engine-id")
		}
		// MooncakeBootstrapServer.query's answer: {dp_rank: {"engine_id", "worker_addr": {tp_rank: {pp_rank: addr}}}}.
		query, _ := json.Marshal(map[string]any{"0": map[string]any{"engine_id": *engineID, "worker_addr": map[string]any{"0": map[string]any{"0": s.workerAddr}}}})
		boot := http.NewServeMux()
		boot.HandleFunc("/query", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(query)
		})
		go func() { log.Fatal(http.ListenAndServe(*bootstrap, boot)) }()
	}
	log.Fatal(http.ListenAndServe(*addr, mux))
}
