// The load generator of the front data-path benchmark (benchmarks/front/): -c workers, each with its own
// keep-alive connection, send completions back to back for -duration (or -n requests in all); prints one
// JSON object: the requests answered 200 and whole, the errors (and the first), the wall time, latency
// percentiles and, streamed, the server-sent events counted (data lines before "data: [DONE]").
//
// A process of its own, compiled, so its cost is neither the front's nor in the front's process tree.
// The standard library only, so it builds offline.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error"`
	Seconds    float64 `json:"seconds"`
	Chunks     int64   `json:"chunks"`
	P50Ms      float64 `json:"p50_ms"`
	P90Ms      float64 `json:"p90_ms"`
	P99Ms      float64 `json:"p99_ms"`
}

func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// one sends one request; it returns the events counted (streamed) or an error.
func one(client *http.Client, url string, body []byte, stream bool) (int64, error) {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, text)
	}
	if !stream {
		text, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if !bytes.Contains(text, []byte(`"choices"`)) {
			return 0, fmt.Errorf("not a completion: %.300s", text)
		}
		return 0, nil
	}
	reader := bufio.NewReaderSize(resp.Body, 64<<10)
	var events int64
	for {
		line, err := reader.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: ")) {
			if bytes.HasPrefix(line, []byte("data: [DONE]")) {
				io.Copy(io.Discard, reader)
				return events, nil
			}
			if bytes.Contains(line, []byte(`"error"`)) {
				return events, fmt.Errorf("error event: %.300s", line)
			}
			events++
		}
		if err != nil {
			return events, fmt.Errorf("stream ended before [DONE] after %d events: %v", events, err)
		}
	}
}

func main() {
	url := flag.String("url", "", "the completions URL")
	workers := flag.Int("c", 1, "concurrent connections")
	duration := flag.Duration("duration", 2*time.Second, "how long to send (without -n)")
	total := flag.Int64("n", 0, "requests in all (instead of -duration)")
	stream := flag.Bool("stream", false, "stream the answers")
	tokens := flag.Int("tokens", 16, "max_tokens: the stand-in's events per streamed answer")
	flag.Parse()
	if *url == "" {
		log.Fatal("-url is required")
	}
	body, _ := json.Marshal(map[string]any{"model": "bench", "prompt": "a prompt of the front benchmark", "max_tokens": *tokens, "stream": *stream})
	transport := &http.Transport{
		MaxIdleConns:        *workers * 2,
		MaxIdleConnsPerHost: *workers * 2,
		DisableCompression:  true,
		IdleConnTimeout:     90 * time.Second,
	}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}
	var sent, errors, chunks atomic.Int64
	var mu sync.Mutex
	var firstError string
	latencies := make([][]time.Duration, *workers)
	start := time.Now()
	deadline := start.Add(*duration)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				if *total > 0 {
					if sent.Add(1) > *total {
						return
					}
				} else if time.Now().After(deadline) {
					return
				}
				began := time.Now()
				events, err := one(client, *url, body, *stream)
				took := time.Since(began)
				if err != nil {
					errors.Add(1)
					mu.Lock()
					if firstError == "" {
						firstError = err.Error()
					}
					mu.Unlock()
					continue
				}
				chunks.Add(events)
				latencies[w] = append(latencies[w], took)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	out := result{
		Requests: int64(len(all)), Errors: errors.Load(), FirstError: firstError, Seconds: elapsed.Seconds(),
		Chunks: chunks.Load(), P50Ms: percentile(all, 0.50), P90Ms: percentile(all, 0.90), P99Ms: percentile(all, 0.99),
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
