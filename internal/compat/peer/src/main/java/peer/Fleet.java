package peer;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;

import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Several RedissonClients in one JVM, for the bench's fleet section
 * (bench/fleet.go): a fleet of N clients, each with its own connection pool,
 * whose threads call RRateLimiter.tryAcquire(1) on one limiter. The clients
 * share one Netty event loop group and one executor (Redisson's way of running
 * many clients in one JVM), so that 64 clients do not start 64 x 32 Netty
 * threads on a 2-core machine.
 *
 * Line protocol as Peer's: "READY fleet", then one answer line per command,
 * "OK [result...]" or "ERR <ExceptionClass> <message>". Commands:
 *   fleet N POOL                     make (once) the fleet of N clients, POOL connections each (all connected)
 *   trySetRate KEY RATE INTERVAL_MS  RRateLimiter.trySetRate(OVERALL, ...) through a control client
 *   load N KEY THREADS MS WINDOW_MS  THREADS threads over fleet N's clients (thread i on client i mod N)
 *                                    call tryAcquire(1) for MS; answer " decisions grants proven": proven
 *                                    is the most grants whose whole call (wall clock before it, after
 *                                    its answer, ms) lies inside one window [t, t+WINDOW_MS)
 *   quit
 * Only API present in every Redisson version the peer builds against is used.
 */
public final class Fleet {

    private final String addr;
    private final EventLoopGroup loops;
    private final ExecutorService executor;
    private final RedissonClient control;
    private final Map<Integer, List<RedissonClient>> fleets = new HashMap<>();
    private final List<RedissonClient> all = new ArrayList<>();

    private Fleet(String addr) {
        this.addr = addr;
        int n = Math.max(2, 2 * Runtime.getRuntime().availableProcessors());
        this.loops = new NioEventLoopGroup(n);
        this.executor = Executors.newFixedThreadPool(n);
        this.control = client(2);
    }

    private RedissonClient client(int pool) {
        Config config = new Config();
        config.setEventLoopGroup(loops);
        config.setExecutor(executor);
        config.useSingleServer()
                .setAddress("redis://" + addr)
                .setConnectionMinimumIdleSize(pool)
                .setConnectionPoolSize(pool)
                .setSubscriptionConnectionMinimumIdleSize(0)
                .setSubscriptionConnectionPoolSize(1)
                .setTimeout(10000);
        RedissonClient c = Redisson.create(config);
        all.add(c);
        return c;
    }

    public static void main(String[] args) throws Exception {
        String addr = null;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--addr") && i + 1 < args.length) {
                addr = args[++i];
            } else {
                System.err.println("usage: Fleet --addr host:port");
                System.exit(2);
            }
        }
        if (addr == null) {
            System.err.println("usage: Fleet --addr host:port");
            System.exit(2);
        }
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        Fleet f = new Fleet(addr);
        out.println("READY fleet");
        out.flush();
        try {
            f.serve(out);
        } finally {
            f.shutdown();
        }
    }

    private void shutdown() {
        for (RedissonClient c : all) {
            c.shutdown(0, 2, TimeUnit.SECONDS);
        }
        executor.shutdownNow();
        loops.shutdownGracefully(0, 2, TimeUnit.SECONDS);
    }

    private void serve(PrintStream out) throws Exception {
        Peer.serveLines(out, this::handle);
    }

    private static void need(String[] a, int n) {
        if (a.length < n) {
            throw new IllegalArgumentException("command " + a[0] + " needs " + (n - 1) + " arguments");
        }
    }

    private String handle(String[] a) throws Exception {
        switch (a[0]) {
            case "fleet": {
                need(a, 3);
                int n = Integer.parseInt(a[1]);
                int pool = Integer.parseInt(a[2]);
                if (n < 1 || pool < 1) {
                    throw new IllegalArgumentException("fleet needs N >= 1 and POOL >= 1");
                }
                if (!fleets.containsKey(n)) {
                    List<RedissonClient> cs = new ArrayList<>();
                    for (int i = 0; i < n; i++) {
                        cs.add(client(pool));
                    }
                    fleets.put(n, cs);
                }
                return " " + n;
            }
            case "trySetRate": {
                need(a, 4);
                RRateLimiter rl = control.getRateLimiter(a[1]);
                return " " + rl.trySetRate(RateType.OVERALL, Long.parseLong(a[2]), Long.parseLong(a[3]), RateIntervalUnit.MILLISECONDS);
            }
            case "load": {
                need(a, 6);
                List<RedissonClient> cs = fleets.get(Integer.parseInt(a[1]));
                if (cs == null) {
                    throw new IllegalArgumentException("no fleet of " + a[1] + " clients");
                }
                return load(cs, a[2], Integer.parseInt(a[3]), Long.parseLong(a[4]), Long.parseLong(a[5]));
            }
            default:
                throw new IllegalArgumentException("unknown command " + a[0]);
        }
    }

    private static String load(List<RedissonClient> cs, String key, int threads, long durationMs, long windowMs) throws Exception {
        RRateLimiter[] rls = new RRateLimiter[cs.size()];
        for (int i = 0; i < rls.length; i++) {
            rls[i] = cs.get(i).getRateLimiter(key);
        }
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch start = new CountDownLatch(1);
        long[] deadline = new long[1];
        long[] decisions = new long[threads];
        long[][] spans = new long[threads][];
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            final int idx = i;
            final RRateLimiter rl = rls[i % rls.length];
            Thread t = new Thread(() -> {
                long[] buf = new long[512];
                int n = 0;
                long d = 0;
                try {
                    start.await();
                    while (true) {
                        long t0 = System.currentTimeMillis();
                        if (t0 >= deadline[0]) {
                            break;
                        }
                        boolean ok = rl.tryAcquire(1);
                        d++;
                        if (ok) {
                            long t1 = System.currentTimeMillis();
                            if (n == buf.length) {
                                buf = Arrays.copyOf(buf, n * 2);
                            }
                            buf[n++] = t0;
                            buf[n++] = t1;
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                } finally {
                    decisions[idx] = d;
                    spans[idx] = Arrays.copyOf(buf, n);
                }
            }, "fleet-" + i);
            ts.add(t);
            t.start();
        }
        deadline[0] = System.currentTimeMillis() + durationMs;
        start.countDown();
        for (Thread t : ts) {
            t.join();
        }
        if (!failures.isEmpty()) {
            Throwable f = failures.get(0);
            throw f instanceof Exception ? (Exception) f : new RuntimeException(f);
        }
        long total = 0;
        int grants = 0;
        for (int i = 0; i < threads; i++) {
            total += decisions[i];
            grants += spans[i].length / 2;
        }
        // A grant whose call was sent at or after t0 and answered before
        // t1 + 1 (the clock is in ms) lies in [t, t + windowMs) for every t
        // in [t1 + 1 - windowMs, t0]: the most such ranges that share a point,
        // as bench/fleet.go's provenInWindow counts.
        long[] lo = new long[grants];
        long[] hi = new long[grants];
        int k = 0;
        for (long[] s : spans) {
            for (int i = 0; i < s.length; i += 2) {
                long a = s[i + 1] + 1 - windowMs;
                if (a <= s[i]) {
                    lo[k] = a;
                    hi[k] = s[i];
                    k++;
                }
            }
        }
        lo = Arrays.copyOf(lo, k);
        hi = Arrays.copyOf(hi, k);
        Arrays.sort(lo);
        Arrays.sort(hi);
        int best = 0;
        int cur = 0;
        int j = 0;
        for (long l : lo) {
            while (hi[j] < l) {
                cur--;
                j++;
            }
            cur++;
            best = Math.max(best, cur);
        }
        return " " + total + " " + grants + " " + best;
    }
}
