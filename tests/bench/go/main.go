// Command bench_contender_go: ours through the Go binding (capi/go), for
// tests/bench/harness.py. The Go twin of contender.py and contender.c: same subcommands,
// options and line protocol (see contender.py). Built by tests/bench/go/build.sh, which
// points this module at the binding in this checkout whatever its module path is.
// Not a test: run tests/bench/run.sh --go.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	me "mongoelector_binding"
)

var (
	outMu sync.Mutex
	stdin = bufio.NewReader(os.Stdin)
)

func say(format string, a ...any) {
	outMu.Lock()
	fmt.Printf(format+"\n", a...)
	outMu.Unlock()
}

func die(what string, err error) {
	say("ERROR %s: %v", what, err)
	fmt.Fprintf(os.Stderr, "bench_contender_go: %s: %v\n", what, err)
	os.Exit(1)
}

func must(err error, what string) {
	if err != nil {
		die(what, err)
	}
}

// mono: CLOCK_MONOTONIC seconds (what time.monotonic() and clock_gettime give the others).
func mono() float64 {
	var ts syscall.Timespec
	_ = clockGettime(&ts)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

func readLine() string {
	s, err := stdin.ReadString('\n')
	if err != nil && s == "" {
		return ""
	}
	return strings.TrimSpace(s)
}

func mark(label string) {
	say("MARK %s", label)
	if readLine() == "" {
		os.Exit(1)
	}
}

func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line[len(field)+1:])
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return -1
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6 + float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	rank := int((p*float64(len(v)) + 99.999999) / 100)
	if rank < 1 {
		rank = 1
	}
	if rank > len(v) {
		rank = len(v)
	}
	return v[rank-1]
}

type options struct {
	uri, otherURI, db, keys, key, clients, mode string
	unsafe                                      bool
	n, threads, warmup                          int
	seconds, ttl, step, idle                    float64
}

var opt options

func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func newClient(uri string) *me.Client {
	c, err := me.NewClient(uri, opt.db)
	must(err, "NewClient")
	return c
}

// deleteOnRelease: -1 library default.
func newLocker(c *me.Client, key string, ttl float64, deleteOnRelease int, collection string) *me.Locker {
	o := &me.LockerOptions{TTL: dur(ttl), Collection: collection, AllowUnsafeServer: opt.unsafe}
	if deleteOnRelease >= 0 {
		o.DeleteOnRelease = me.Bool(deleteOnRelease == 1)
	}
	l, err := me.NewLocker(bg, c, key, o)
	must(err, "NewLocker")
	return l
}

func acquire(l *me.Locker) {
	_, err := l.Acquire(context.Background())
	must(err, "Acquire")
}

// bg: the benchmark's calls wait as long as they need (their own timeouts bound them).
var bg = context.Background()

func release(l *me.Locker) { must(l.Release(bg), "Release") }

// ---- ops -----------------------------------------------------------------------------
func cmdOps() {
	c := newClient(opt.uri)
	other := newClient(opt.otherURI)
	lat := map[string][]float64{}
	order := []string{}
	timed := func(op string, fn func()) {
		mark(op + ":begin")
		t := time.Now()
		fn()
		d := time.Since(t).Seconds() * 1e3
		mark(op + ":end")
		if _, ok := lat[op]; !ok {
			order = append(order, op)
		}
		lat[op] = append(lat[op], d)
	}
	check := func(ok bool, what string) {
		if !ok {
			die("sanity check failed", errors.New(what))
		}
	}
	a := newLocker(c, "ops-defaults", 600, -1, "")
	for i := 0; i < 3; i++ {
		acquire(a)
		release(a)
	}
	for i := 0; i < opt.n; i++ {
		timed("acquire_defaults", func() { acquire(a) })
		timed("touch", func() { ok, _, err := a.Touch(bg); must(err, "Touch"); check(ok, "touch while holding") })
		timed("locked", func() { ok, err := a.Locked(bg); must(err, "Locked"); check(ok, "locked() while held") })
		timed("owned", func() { ok, err := a.Owned(bg); must(err, "Owned"); check(ok, "owned() while holding") })
		timed("release_defaults", func() { release(a) })
	}
	for s := 0; s < 2; s++ {
		name, acq, rel := "ops-present", "acquire_present", "release_keep"
		if s == 1 {
			name, acq, rel = "ops-absent", "acquire_absent", "release_delete"
		}
		lk := newLocker(c, name, 600, s, "")
		for i := 0; i < 3; i++ {
			acquire(lk)
			release(lk)
		}
		for i := 0; i < opt.n; i++ {
			timed(acq, func() { acquire(lk) })
			timed(rel, func() { release(lk) })
		}
		lk.Close()
	}
	holder := newLocker(other, "ops-held", 600, -1, "")
	acquire(holder)
	b := newLocker(c, "ops-held", 600, -1, "")
	contended := func() {
		_, err := b.TryAcquire(bg)
		if !errors.Is(err, me.ErrLockHeld) {
			die("contended attempt", fmt.Errorf("expected ErrLockHeld, got %v", err))
		}
	}
	contended()
	for i := 0; i < opt.n; i++ {
		timed("contended", contended)
	}
	release(holder)
	for i := 0; i <= opt.n; i++ {
		key := fmt.Sprintf("ops-new-%d", i)
		var lk *me.Locker
		fn := func() { lk = newLocker(c, key, 600, -1, "ops_new"); acquire(lk) }
		if i == 0 {
			fn()
		} else {
			timed("new_key", fn)
		}
		lk.Close()
	}
	var lead, fol [2]*me.Elector
	for s := 0; s < 2; s++ {
		key := "ops-elect"
		if s == 1 {
			key = "ops-elect_status"
		}
		var err error
		eo := &me.ElectorOptions{TTL: 60 * time.Second, DisableStatusReport: s == 0}
		lead[s], err = me.NewElector(bg, c, key, eo)
		must(err, "NewElector")
		fol[s], err = me.NewElector(bg, c, key, eo)
		must(err, "NewElector")
		must(lead[s].Poll(bg), "Poll")
		must(fol[s].Poll(bg), "Poll")
		l, _ := lead[s].IsLeader()
		f, _ := fol[s].IsLeader()
		check(l && !f, "first poll leads, second follows")
	}
	for i := 0; i < opt.n; i++ {
		timed("leader_poll", func() { must(lead[0].Poll(bg), "Poll") })
		timed("follower_poll", func() { must(fol[0].Poll(bg), "Poll") })
		timed("leader_poll_status", func() { must(lead[1].Poll(bg), "Poll") })
		timed("follower_poll_status", func() { must(fol[1].Poll(bg), "Poll") })
	}
	for s := 0; s < 2; s++ {
		fol[s].Close()
		lead[s].Close()
	}
	var sb strings.Builder
	sb.WriteString(`RESULT {"phase":"ops","latency_ms":{`)
	for i, op := range order {
		v := lat[op]
		sort.Float64s(v)
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, "%q:[", op)
		for j, x := range v {
			if j > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "%.4f", x)
		}
		sb.WriteString("]")
	}
	sb.WriteString("}}")
	say("%s", sb.String())
}

// ---- cycles ----------------------------------------------------------------------------
func cmdCycles() {
	T, shared := opt.threads, opt.clients == "shared"
	var base *me.Client
	if shared {
		base = newClient(opt.uri)
	}
	lockers := make([]*me.Locker, T)
	for t := 0; t < T; t++ {
		c := base
		if !shared {
			c = newClient(opt.uri)
		}
		lockers[t] = newLocker(c, fmt.Sprintf("cyc-%d-%d", os.Getpid(), t), 600, -1, "")
		for i := 0; i < opt.warmup; i++ {
			acquire(lockers[t])
			release(lockers[t])
		}
	}
	var stop atomic.Bool
	counts := make([]int64, T)
	var lats []float64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for t := 0; t < T; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			l := lockers[t]
			<-start
			for !stop.Load() {
				s := time.Now()
				acquire(l)
				release(l)
				if T == 1 {
					lats = append(lats, time.Since(s).Seconds()*1e3)
				}
				counts[t]++
			}
		}(t)
	}
	cpu0 := cpuSeconds()
	s := time.Now()
	close(start)
	time.Sleep(dur(opt.seconds))
	stop.Store(true)
	wg.Wait()
	secs := time.Since(s).Seconds()
	cpu := cpuSeconds() - cpu0
	var total int64
	per := make([]string, T)
	for t, n := range counts {
		total += n
		per[t] = strconv.FormatInt(n, 10)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `RESULT {"phase":"cycles","threads":%d,"clients":%q,"cycles":%d,"seconds":%.6f,"cpu_s":%.4f,"per_thread":[%s]`,
		T, opt.clients, total, secs, cpu, strings.Join(per, ","))
	if T == 1 && len(lats) > 0 {
		sort.Float64s(lats)
		sum := 0.0
		for _, x := range lats {
			sum += x
		}
		fmt.Fprintf(&sb, `,"p50_ms":%.5f,"p90_ms":%.5f,"p99_ms":%.5f,"mean_ms":%.5f,"cdf_ms":[`,
			pct(lats, 50), pct(lats, 90), pct(lats, 99), sum/float64(len(lats)))
		for i := 0; i <= 200; i++ {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "%.5f", lats[int(float64(i)*float64(len(lats)-1)/200+0.5)])
		}
		sb.WriteString("]")
	}
	sb.WriteString("}")
	say("%s", sb.String())
}

// ---- elect -----------------------------------------------------------------------------
func cmdElect() {
	c := newClient(opt.uri)
	keys := strings.Split(opt.keys, ",")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	els := make([]*me.Elector, len(keys))
	for i, k := range keys {
		k := k
		e, err := me.NewElector(bg, c, k, &me.ElectorOptions{
			TTL:              dur(opt.ttl),
			OnStartedLeading: func(context.Context) { say("EVENT leader %.6f %s", mono(), k) },
			OnStoppedLeading: func() { say("EVENT loss %.6f %s", mono(), k) },
		})
		must(err, "NewElector")
		els[i] = e
	}
	for i, e := range els {
		must(e.Start(), "Start")
		say("EVENT started %.6f %s", mono(), keys[i])
	}
	<-sig
	t := mono()
	for _, e := range els {
		e.Stop(bg)
	}
	say("EVENT stopped %.6f %.3f", mono(), mono()-t)
	os.Exit(0)
}

// ---- contend ---------------------------------------------------------------------------
func cmdContend() {
	c := newClient(opt.uri)
	l := newLocker(c, opt.key, opt.ttl, -1, "")
	_, err := l.VerifyTime(bg)
	must(err, "VerifyTime")
	say("READY")
	f := strings.Fields(readLine())
	if len(f) != 2 || f[0] != "GO" {
		return
	}
	startAt, _ := strconv.ParseFloat(f[1], 64)
	end := startAt + opt.seconds
	time.Sleep(dur(startAt - mono()))
	n := 0
	var waits []float64
	for {
		left := end - mono()
		if left <= 0 {
			break
		}
		s := mono()
		_, err := l.Acquire(context.Background(), me.WithTimeout(dur(left)), me.WithStep(dur(opt.step)))
		if errors.Is(err, me.ErrTimeout) {
			break
		}
		must(err, "Acquire")
		t := mono()
		if t > end {
			release(l)
			break
		}
		n++
		waits = append(waits, (t-s)*1e3)
		release(l)
	}
	sort.Float64s(waits)
	mx := 0.0
	if len(waits) > 0 {
		mx = waits[len(waits)-1]
	}
	say(`RESULT {"phase":"contend","acquisitions":%d,"wait_p50_ms":%.4f,"wait_max_ms":%.4f}`, n, pct(waits, 50), mx)
}

// ---- cost ------------------------------------------------------------------------------
func cmdCost() {
	c := newClient(opt.uri)
	rssBase, thrBase := procStatus("VmRSS"), procStatus("Threads")
	leading := make(chan struct{}, 1)
	e, err := me.NewElector(bg, c, "cost-idle", &me.ElectorOptions{TTL: dur(opt.ttl),
		OnStartedLeading: func(context.Context) {
			select {
			case leading <- struct{}{}:
			default:
			}
		}})
	must(err, "NewElector")
	must(e.Start(), "Start")
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		die("cost", errors.New("the idle elector did not lead within 30 s"))
	}
	time.Sleep(500 * time.Millisecond)
	say("READY")
	cpu0, s := cpuSeconds(), mono()
	time.Sleep(dur(opt.idle))
	say(`RESULT {"phase":"idle","cpu_s":%.4f,"seconds":%.3f,"rss_kib":%d,"rss_base_kib":%d,"threads":%d,"threads_base":%d}`,
		cpuSeconds()-cpu0, mono()-s, procStatus("VmRSS"), rssBase, procStatus("Threads"), thrBase)
	e.Close()
	c.Close()
	for readLine() != "" {
	}
}

// ---- scale -----------------------------------------------------------------------------
// cmdScale: keep-alive leases on scale-0 .. scale-(N-1), one client; --mode batched (the
// library's default renewer) or per-key (MONGOELECTOR_BATCH_RENEWALS=0 in the
// environment, checked). GROW N acquires the missing keys on 8 goroutines at once;
// a lease's loss prints EVENT lost T KEY the moment its Context ends with ErrLeaseLost.
func cmdScale() {
	perKeyEnv := os.Getenv("MONGOELECTOR_BATCH_RENEWALS") == "0"
	if opt.mode != "batched" && opt.mode != "per-key" {
		die("scale", fmt.Errorf("unknown --mode %s (batched or per-key)", opt.mode))
	}
	if perKeyEnv != (opt.mode == "per-key") {
		die("scale", fmt.Errorf("--mode %s but MONGOELECTOR_BATCH_RENEWALS=%q", opt.mode,
			os.Getenv("MONGOELECTOR_BATCH_RENEWALS")))
	}
	// Below the client's default pool (10 connections), so that the renewer always finds
	// one while keys are being acquired; transient failures are retried.
	const growers, attempts = 8, 10
	c := newClient(opt.uri)
	var leases []*me.Lease
	say("READY")
	for {
		line := readLine()
		if line == "" || line == "QUIT" {
			break
		}
		f := strings.Fields(line)
		switch f[0] {
		case "GROW":
			target, _ := strconv.Atoi(f[1])
			s := mono()
			if target > len(leases) {
				from := len(leases)
				grown := make([]*me.Lease, target-from)
				var next atomic.Int64
				var wg sync.WaitGroup
				for g := 0; g < growers && g < len(grown); g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := int(next.Add(1)) - 1
							if i >= len(grown) {
								return
							}
							key := fmt.Sprintf("scale-%d", from+i)
							o := &me.LockerOptions{TTL: dur(opt.ttl), AllowUnsafeServer: opt.unsafe}
							var l *me.Locker
							var le *me.Lease
							var err error
							// Only this process uses these keys: a key found held after a
							// failed attempt was taken by that attempt: free it, try again.
							for a := 1; a <= attempts; a++ {
								if l == nil {
									l, err = me.NewLocker(bg, c, key, o) // may create the indexes
								}
								if l != nil {
									le, err = l.TryHold(bg)
								}
								if err == nil || (a == 1 && errors.Is(err, me.ErrLockExists)) {
									break
								}
								if l != nil && errors.Is(err, me.ErrLockExists) {
									fmt.Fprintf(os.Stderr, "bench_contender_go: %s: held after a failed attempt: freeing it\n", key)
									if rerr := l.ForceRelease(bg); rerr == nil {
										continue
									}
								}
								fmt.Fprintf(os.Stderr, "bench_contender_go: %s: attempt %d: %v\n", key, a, err)
								if a < attempts {
									time.Sleep(500 * time.Millisecond)
								}
							}
							must(err, "TryHold "+key)
							grown[i] = le
							go func() {
								<-le.Done()
								if errors.Is(context.Cause(le.Context()), me.ErrLeaseLost) {
									say("EVENT lost %.6f %s", mono(), key)
								}
							}()
						}
					}()
				}
				wg.Wait()
				leases = append(leases, grown...)
			}
			say("HOLDING %d %.3f", len(leases), mono()-s)
		case "STATS":
			lost := 0
			for _, le := range leases {
				if le.Lost() {
					lost++
				}
			}
			st, err := me.Stats()
			must(err, "Stats")
			say(`RESULT {"phase":"scale","mode":"%s","held":%d,"lost":%d,"threads":%d,"rss_kib":%d,`+
				`"cpu_s":%.4f,"renewals":%d,"renewal_failures":%d,"round_trips":%d}`,
				opt.mode, len(leases), lost, procStatus("Threads"), procStatus("VmRSS"), cpuSeconds(),
				st.Renewals, st.RenewalFailures, st.RoundTrips)
		}
	}
	os.Exit(0)
}

func cmdProbe() {
	c := newClient(opt.uri)
	l := newLocker(c, "probe", 30, -1, "")
	_, err := l.TryAcquire(bg)
	must(err, "TryAcquire")
	release(l)
	name, version, err := c.ServerInfo(bg)
	must(err, "ServerInfo")
	say(`RESULT {"phase":"probe","binding":"go","server":"%s %s"}`, name, version)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench_contender_go SUBCOMMAND --uri URI --db NAME [options]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	fs.StringVar(&opt.uri, "uri", "", "")
	fs.StringVar(&opt.otherURI, "other-uri", "", "")
	fs.StringVar(&opt.db, "db", "", "")
	fs.StringVar(&opt.keys, "keys", "k", "")
	fs.StringVar(&opt.key, "key", "k", "")
	fs.StringVar(&opt.clients, "clients", "shared", "")
	fs.StringVar(&opt.mode, "mode", "batched", "")
	fs.BoolVar(&opt.unsafe, "unsafe", false, "")
	fs.IntVar(&opt.n, "n", 50, "")
	fs.IntVar(&opt.threads, "threads", 1, "")
	fs.IntVar(&opt.warmup, "warmup", 50, "")
	fs.Float64Var(&opt.seconds, "seconds", 5, "")
	fs.Float64Var(&opt.ttl, "ttl", 15, "")
	fs.Float64Var(&opt.step, "step", 0.25, "")
	fs.Float64Var(&opt.idle, "idle", 60, "")
	var ignored string
	var ignoredF float64
	var ignoredI int
	fs.StringVar(&ignored, "impl", "", "")
	fs.Float64Var(&ignoredF, "spin", 0, "")
	fs.Float64Var(&ignoredF, "spin-ttl", 0, "")
	fs.IntVar(&ignoredI, "rounds", 0, "")
	_ = fs.Parse(os.Args[2:])
	if opt.uri == "" || opt.db == "" {
		fmt.Fprintln(os.Stderr, "bench_contender_go: --uri and --db are required")
		os.Exit(2)
	}
	if opt.otherURI == "" {
		opt.otherURI = opt.uri
	}
	switch cmd {
	case "probe":
		cmdProbe()
	case "ops":
		cmdOps()
	case "cycles":
		cmdCycles()
	case "elect":
		cmdElect()
	case "contend":
		cmdContend()
	case "cost":
		cmdCost()
	case "scale":
		cmdScale()
	default:
		fmt.Fprintln(os.Stderr, "bench_contender_go: unknown subcommand", cmd)
		os.Exit(2)
	}
}
