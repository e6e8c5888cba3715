package bench

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/servers"
	"github.com/rankd/rankd/internal/testenv"
)

// TestBatchProducer writes three calls of messages over two topics of 6
// and 3 partitions, each call in one request, and reads the log back:
// every message is there once, on the partition kafka-go's Writer would
// have chosen for its key (kafka.Hash), and the messages of one key are
// in the order they were written.
func TestBatchProducer(t *testing.T) {
	b, _ := startServers(t)
	brokers := []string{b.Addr()}
	parts := map[string]int{"pa": 6, "pb": 3}
	if err := prepareTopics(t.Context(), brokers, []string{"pa", "pb"}, func(topic string) int { return parts[topic] }); err != nil {
		t.Fatal(err)
	}
	p := newBatchProducer(brokers)
	defer p.Close()
	var sent []kafka.Message
	for call := range 3 {
		var msgs []kafka.Message
		for i := range 200 {
			topic := "pa"
			if i%3 == 0 {
				topic = "pb"
			}
			key := "k" + strconv.Itoa(i%17)
			msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte(key), Value: []byte(fmt.Sprintf("%s %d %d", key, call, i))})
		}
		if err := p.Write(t.Context(), msgs); err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		sent = append(sent, msgs...)
	}
	log := testenv.ReadLog(t, brokers, "pa", "pb")
	if len(log) != len(sent) {
		t.Fatalf("the log holds %d messages, want %d", len(log), len(sent))
	}
	at := map[string]int{} // value -> partition
	byPart := map[string][]string{}
	for _, m := range log {
		v := string(m.Value)
		if _, dup := at[v]; dup {
			t.Fatalf("%q written twice", v)
		}
		at[v] = m.Partition
		k := m.Topic + "/" + strconv.Itoa(m.Partition)
		byPart[k] = append(byPart[k], v)
	}
	var bal kafka.Hash
	want := map[string][]string{}
	for _, m := range sent {
		ids := make([]int, parts[m.Topic])
		for i := range ids {
			ids[i] = i
		}
		p := bal.Balance(m, ids...)
		if got, ok := at[string(m.Value)]; !ok || got != p {
			t.Fatalf("%s %q on partition %d (found %v), want %d", m.Topic, m.Value, got, ok, p)
		}
		k := m.Topic + "/" + strconv.Itoa(p)
		want[k] = append(want[k], string(m.Value))
	}
	for k, w := range want {
		if fmt.Sprint(byPart[k]) != fmt.Sprint(w) {
			t.Errorf("%s holds %v, want %v in that order", k, byPart[k], w)
		}
	}
}

// TestBatchProducerRetries stops the broker, writes while it is down and
// starts it again 300 ms later: Write retries until it is back, and every
// message is in the log (at least once: an attempt whose answer was lost
// may have written it).
func TestBatchProducerRetries(t *testing.T) {
	b, err := servers.StartBroker(t.Context(), servers.BrokerOptions{DataDir: t.TempDir(), Topics: []string{"pr"}, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	brokers := []string{b.Addr()}
	p := newBatchProducer(brokers)
	defer p.Close()
	msgs := func(call int) []kafka.Message {
		var out []kafka.Message
		for i := range 40 {
			out = append(out, kafka.Message{Topic: "pr", Key: []byte("k" + strconv.Itoa(i)), Value: []byte(fmt.Sprintf("%d %d", call, i))})
		}
		return out
	}
	if err := p.Write(t.Context(), msgs(0)); err != nil {
		t.Fatal(err)
	}
	b.Stop(syscall.SIGKILL)
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		restarted <- b.Restart()
	}()
	if err := p.Write(t.Context(), msgs(1)); err != nil {
		t.Fatalf("write while the broker restarts: %v", err)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range testenv.ReadLog(t, brokers, "pr") {
		seen[string(m.Value)] = true
	}
	for call := range 2 {
		for _, m := range msgs(call) {
			if !seen[string(m.Value)] {
				t.Errorf("%q is not in the log", m.Value)
			}
		}
	}
}
