// Package kgroup works around defects of franz-go's kfake broker (the
// Kafka-protocol broker of rankd's tests) in its classic consumer group
// coordinator, so that tests see Kafka's bounds on a rebalance.
//
// The defects (kfake v0.0.0-20260918054303-01f206a7e32c, the newest the Go
// module proxy serves; pkg/kfake/groups.go), shown by testenv's
// TestGroupCrashLoop (1, 2) and TestGroupRebalanceEndsAtTimeout (3) when
// RANKD_KFAKE_DEAD_MEMBERS=1 turns this package off:
//
//  1. A dead member is never expired. (*group).reply starts the member's
//     session timer (updateHeartbeat) only if the response could be handed
//     to the connection; when the member was killed while its JoinGroup or
//     SyncGroup was parked, it stays in the group with no session timer.
//     completeRebalance's pending-sync timer would remove it, but
//     completeLeaderSync stops that timer (clearPendingSync) once the
//     leader syncs, and the group goes Stable with the dead member holding
//     its partitions until some other member joins or leaves, which may be
//     never. Kafka schedules every member's session expiry when the join
//     completes, whether the response reached it or not.
//  2. A live member waiting in a rebalance is expired. The session timer of
//     a member parked in JoinGroup (updateMemberAndRebalance) or SyncGroup
//     keeps running from its last heartbeat: past the session timeout
//     kfake removes it without answering, the client times out (kafka-go:
//     its Timeout plus the rebalance timeout) and joins again as a new
//     member. Kafka keeps a member that awaits a join or a sync alive.
//  3. A rebalance may never end. (*group).rebalance stops and restarts the
//     rebalance timer on every call, that is on every join, leave and
//     expiry, so members joining in turn (a crash loop) postpone the end
//     indefinitely. Kafka ends it at the rebalance timeout from its start,
//     removing the members that did not rejoin.
//
// ExpireDeadMembers restores Kafka's bounds from outside kfake. It watches
// every group request and polls the groups (kfake's GroupInfo), and it
// sends, through the broker's own port: a LeaveGroup for a member of a
// Stable group silent for longer than the session timeout since the
// generation began (1); a Heartbeat on behalf of a member parked in
// JoinGroup or SyncGroup, which resets kfake's timer (2); a LeaveGroup for
// every member that did not rejoin when a rebalance has lasted the
// rebalance timeout (3), after which kfake completes it at once.
package kgroup

import (
	"context"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// pollInterval is how often the groups are checked: an expiry or the
	// end of a rebalance comes at most about this late.
	pollInterval = 50 * time.Millisecond
	// keepAliveInterval is how often a parked member is heartbeated for.
	keepAliveInterval = 200 * time.Millisecond
)

// keepAlive turns (2) on; a test turns it off to see (1) alone.
var keepAlive = true

// Reaper applies Kafka's session and rebalance timeouts to a kfake
// cluster's classic consumer groups.
type Reaper struct {
	c      *kfake.Cluster
	client *kafka.Client
	stop   chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	groups map[string]*groupState
	stats  Stats
}

// Stats counts what the reaper did.
type Stats struct {
	Expired     int // dead members of a Stable group made to leave (1)
	KeptAlive   int // heartbeats sent for parked members (2)
	NotRejoined int // members removed at the end of a rebalance (3)
}

type groupState struct {
	session   time.Duration // the largest session timeout a member joined with
	rebalance time.Duration // the largest rebalance timeout
	members   map[string]*memberState
	gen       int32     // the generation seen last
	genAt     time.Time // when it was first seen
	prepGen   int32     // the generation of the rebalance in preparation
	prepAt    time.Time // when it was first seen preparing (zero: not)
}

type memberState struct {
	last      time.Time // its last request, or first sight
	kind      int16     // key of that request
	gen       int32     // the generation it last named (sync, heartbeat, commit), or first saw
	joinGen   int32     // the generation its last JoinGroup was sent in
	syncGen   int32     // the generation of its last SyncGroup
	synthetic int       // heartbeats the reaper sent for it, not yet seen
	keptAt    time.Time // the last of those
}

// ExpireDeadMembers starts applying Kafka's session and rebalance timeouts
// to c's classic consumer groups (see the package doc). Stop ends it.
func ExpireDeadMembers(c *kfake.Cluster) *Reaper {
	r := &Reaper{
		c:      c,
		client: &kafka.Client{Addr: kafka.TCP(c.ListenAddrs()...), Timeout: 5 * time.Second},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		groups: make(map[string]*groupState),
	}
	// An observer: it never handles a request, so it stays installed and
	// kfake serves every request itself.
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		r.observe(req)
		return nil, nil, false
	})
	go r.run()
	return r
}

// Hook is ExpireDeadMembers in the shape of a servers.ChildHook: the
// brokers of the test binaries (testenv.Main) and of the kbroker command
// run it.
func Hook(c *kfake.Cluster) (stop func()) { return ExpireDeadMembers(c).Stop }

// Stop stops the reaper; the observer stays installed.
func (r *Reaper) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// Stats returns what the reaper did so far.
func (r *Reaper) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *Reaper) group(name string) *groupState {
	g := r.groups[name]
	if g == nil {
		g = &groupState{members: make(map[string]*memberState)}
		r.groups[name] = g
	}
	return g
}

func (g *groupState) member(id string) *memberState {
	m := g.members[id]
	if m == nil {
		m = &memberState{joinGen: -1, syncGen: -1}
		g.members[id] = m
	}
	return m
}

// observe records a member's sign of life; it runs on kfake's loop and
// must not call into the cluster.
func (r *Reaper) observe(req kmsg.Request) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := func(group, member string, gen int32) *memberState {
		m := r.group(group).member(member)
		m.last, m.kind = now, req.Key()
		if gen >= 0 {
			m.gen = gen
		}
		return m
	}
	switch req := req.(type) {
	case *kmsg.JoinGroupRequest:
		g := r.group(req.Group)
		g.session = max(g.session, time.Duration(req.SessionTimeoutMillis)*time.Millisecond)
		g.rebalance = max(g.rebalance, time.Duration(req.RebalanceTimeoutMillis)*time.Millisecond)
		if req.MemberID != "" {
			m := seen(req.Group, req.MemberID, -1)
			m.joinGen = m.gen // it joins the rebalance of the generation it was in
		}
	case *kmsg.SyncGroupRequest:
		seen(req.Group, req.MemberID, req.Generation).syncGen = req.Generation
	case *kmsg.HeartbeatRequest:
		if m := r.group(req.Group).members[req.MemberID]; m != nil && m.synthetic > 0 {
			m.synthetic-- // ours
			return
		}
		seen(req.Group, req.MemberID, req.Generation)
	case *kmsg.OffsetCommitRequest:
		if req.MemberID != "" {
			seen(req.Group, req.MemberID, req.Generation)
		}
	}
}

func (r *Reaper) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-time.After(pollInterval):
		}
		r.mu.Lock()
		names := make([]string, 0, len(r.groups))
		for name := range r.groups {
			names = append(names, name)
		}
		r.mu.Unlock()
		for _, name := range names {
			r.check(name)
		}
	}
}

// check applies the timeouts to one group.
func (r *Reaper) check(name string) {
	gi := r.c.GroupInfo(name)
	now := time.Now()
	var leave, keep []string
	var leaveNotRejoined bool
	r.mu.Lock()
	g := r.groups[name]
	if gi == nil {
		delete(r.groups, name)
		r.mu.Unlock()
		return
	}
	if gi.Epoch != g.gen || g.genAt.IsZero() {
		g.gen, g.genAt = gi.Epoch, now
	}
	preparing := gi.State == "PreparingRebalance"
	if !preparing {
		g.prepAt = time.Time{}
	} else if g.prepAt.IsZero() || g.prepGen != gi.Epoch {
		g.prepGen, g.prepAt = gi.Epoch, now
	}
	rebalanceOver := preparing && g.rebalance > 0 && now.Sub(g.prepAt) > g.rebalance+pollInterval
	present := make(map[string]bool, len(gi.Members))
	for _, mi := range gi.Members {
		present[mi.MemberID] = true
		m, ok := g.members[mi.MemberID]
		if !ok {
			// First sight of a member that joined without an ID: in
			// a rebalance it is parked in JoinGroup.
			m = g.member(mi.MemberID)
			m.last, m.gen = now, gi.Epoch
			if preparing {
				m.kind, m.joinGen = kmsg.JoinGroup.Int16(), gi.Epoch
			}
		}
		switch gi.State {
		case "Stable": // (1)
			if g.session > 0 && now.Sub(m.last) > g.session && now.Sub(g.genAt) > g.session {
				leave = append(leave, mi.MemberID)
			}
		case "PreparingRebalance":
			parked := m.kind == kmsg.JoinGroup.Int16() && m.joinGen == gi.Epoch
			switch {
			case parked && keepAlive && now.Sub(m.keptAt) > keepAliveInterval: // (2)
				keep = append(keep, mi.MemberID)
			case !parked && rebalanceOver: // (3)
				leave = append(leave, mi.MemberID)
				leaveNotRejoined = true
			}
		case "CompletingRebalance":
			parked := m.kind == kmsg.SyncGroup.Int16() && m.syncGen == gi.Epoch
			if parked && keepAlive && now.Sub(m.keptAt) > keepAliveInterval { // (2)
				keep = append(keep, mi.MemberID)
			}
		}
	}
	for id := range g.members {
		if !present[id] {
			delete(g.members, id)
		}
	}
	for _, id := range keep {
		m := g.members[id]
		m.synthetic++
		m.keptAt = now
	}
	r.mu.Unlock()

	for _, id := range keep {
		r.heartbeat(name, id, gi.Epoch)
	}
	if len(leave) > 0 {
		r.leave(name, leave, leaveNotRejoined)
	}
}

// heartbeat keeps a parked member alive, as Kafka does.
func (r *Reaper) heartbeat(group, member string, gen int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := r.client.Heartbeat(ctx, &kafka.HeartbeatRequest{GroupID: group, GenerationID: gen, MemberID: member})
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil { // never seen by kfake, or the connection broke
		if g := r.groups[group]; g != nil && g.members[member] != nil && g.members[member].synthetic > 0 {
			g.members[member].synthetic--
		}
		return
	}
	r.stats.KeptAlive++
}

// leave sends the LeaveGroup that a session expiry, or the end of a
// rebalance, stands for.
func (r *Reaper) leave(group string, members []string, notRejoined bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &kafka.LeaveGroupRequest{GroupID: group}
	for _, id := range members {
		req.Members = append(req.Members, kafka.LeaveGroupRequestMember{ID: id})
	}
	resp, err := r.client.LeaveGroup(ctx, req)
	if err != nil || resp.Error != nil {
		return // the next poll tries again
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range resp.Members {
		if m.Error != nil {
			continue
		}
		if notRejoined {
			r.stats.NotRejoined++
		} else {
			r.stats.Expired++
		}
		if g := r.groups[group]; g != nil {
			delete(g.members, m.ID)
		}
	}
}
