package peer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.redisson.config.SingleServerConfig;

/**
 * A line-protocol peer around the real Redisson RRateLimiter, driven by the Go
 * compatibility tests (package compat).
 *
 * One source builds against every Redisson version the suite covers: only the
 * API present in all of them (3.16.3 .. 4.7.0) is called directly; everything
 * newer is looked up by reflection, and an operation the running version lacks
 * answers "ERR Unsupported ...".
 *
 * Startup prints one line: "READY <clientId>". Then each stdin line is one
 * command and gets exactly one answer line: "OK [result...]" or
 * "ERR <ExceptionClass> <message>".
 */
public final class Peer {

    private final RedissonClient redisson;
    private final PrintStream out;

    private Peer(RedissonClient redisson, PrintStream out) {
        this.redisson = redisson;
        this.out = out;
    }

    public static void main(String[] args) throws Exception {
        String addr = null;
        String prefix = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--addr": addr = args[++i]; break;
                case "--name-prefix": prefix = args[++i]; break;
                default:
                    System.err.println("unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        if (addr == null) {
            System.err.println("usage: Peer --addr host:port [--name-prefix P]");
            System.exit(2);
        }
        Config config = new Config();
        SingleServerConfig ssc = config.useSingleServer()
                .setAddress("redis://" + addr)
                .setConnectionMinimumIdleSize(2)
                .setConnectionPoolSize(16)
                .setTimeout(10000);
        if (prefix != null) {
            setNameMapper(ssc, prefix);
        }
        RedissonClient redisson = Redisson.create(config);
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        Peer p = new Peer(redisson, out);
        out.println("READY " + redisson.getId());
        out.flush();
        try {
            p.serve();
        } finally {
            redisson.shutdown(0, 2, TimeUnit.SECONDS);
        }
    }

    /** Installs a NameMapper (org.redisson.api.NameMapper or, in 4.x, org.redisson.config.NameMapper) by reflection. */
    private static void setNameMapper(SingleServerConfig ssc, String prefix) throws Exception {
        Method setter = null;
        for (Method m : ssc.getClass().getMethods()) {
            if (m.getName().equals("setNameMapper") && m.getParameterCount() == 1) {
                setter = m;
                break;
            }
        }
        if (setter == null) {
            throw new IllegalStateException("this Redisson version has no setNameMapper");
        }
        Class<?> iface = setter.getParameterTypes()[0];
        Object mapper = Proxy.newProxyInstance(iface.getClassLoader(), new Class<?>[] {iface}, (proxy, method, margs) -> {
            switch (method.getName()) {
                case "map":
                    return prefix + margs[0];
                case "unmap": {
                    String n = (String) margs[0];
                    return n.startsWith(prefix) ? n.substring(prefix.length()) : n;
                }
                case "toString":
                    return "PrefixNameMapper(" + prefix + ")";
                case "hashCode":
                    return System.identityHashCode(proxy);
                case "equals":
                    return proxy == margs[0];
                default:
                    throw new UnsupportedOperationException(method.getName());
            }
        });
        setter.invoke(ssc, mapper);
    }

    private void serve() throws Exception {
        serveLines(out, this::handle);
    }

    /** One command's handler: what follows "OK" in its answer. */
    interface Handler {
        String handle(String[] args) throws Throwable;
    }

    /**
     * Serves the line protocol on stdin until EOF or "quit" (answered "OK bye"):
     * each command's answer is "OK" and what h returns, or error(t) for what it throws.
     * Peer and Fleet both speak it.
     */
    static void serveLines(PrintStream out, Handler h) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("quit")) {
                out.println("OK bye");
                out.flush();
                return;
            }
            String answer;
            try {
                answer = "OK" + h.handle(line.split(" +"));
            } catch (Throwable t) {
                answer = error(t);
            }
            out.println(answer);
            out.flush();
        }
    }

    static final class Unsupported extends RuntimeException {
        Unsupported(String what) {
            super(what);
        }
    }

    private static String error(Throwable t) {
        while ((t instanceof InvocationTargetException || t instanceof java.util.concurrent.ExecutionException
                || t instanceof java.util.concurrent.CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        String msg = String.valueOf(t.getMessage()).replace('\r', ' ').replace('\n', ' ');
        return "ERR " + t.getClass().getSimpleName() + " " + msg;
    }

    private static RateType mode(String s) {
        switch (s) {
            case "0": case "OVERALL": return RateType.OVERALL;
            case "1": case "PER_CLIENT": return RateType.PER_CLIENT;
            default: throw new IllegalArgumentException("bad mode " + s);
        }
    }

    private static void need(String[] a, int n) {
        if (a.length < n) {
            throw new IllegalArgumentException("command " + a[0] + " needs " + (n - 1) + " arguments");
        }
    }

    /** Calls a public method by name and exact parameter types, or throws Unsupported if this version lacks it. */
    private static Object call(Object target, String name, Class<?>[] types, Object... args) throws Throwable {
        Method m;
        try {
            m = target.getClass().getMethod(name, types);
        } catch (NoSuchMethodException e) {
            StringBuilder sig = new StringBuilder(name).append('(');
            for (int i = 0; i < types.length; i++) {
                sig.append(i > 0 ? "," : "").append(types[i].getSimpleName());
            }
            throw new Unsupported(sig.append(')').toString());
        }
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    private static Class<?> cls(String name) {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            throw new Unsupported(name);
        }
    }

    /** Builds a 4.4+ RateLimiterArgs reflectively. */
    private static Object rateLimiterArgs(RateType mode, long rate, long intervalMs, long keepAliveMs, boolean keepState) throws Throwable {
        Class<?> c = cls("org.redisson.api.ratelimiter.RateLimiterArgs");
        Method of = c.getMethod("of", RateType.class, long.class, Duration.class);
        Object a = of.invoke(null, mode, rate, Duration.ofMillis(intervalMs));
        a = c.getMethod("keepAliveTime", Duration.class).invoke(a, Duration.ofMillis(keepAliveMs));
        a = c.getMethod("keepState", boolean.class).invoke(a, keepState);
        return a;
    }

    private static String expireMethod(String flag) {
        switch (flag) {
            case "NX": return "expireIfNotSet";
            case "XX": return "expireIfSet";
            case "GT": return "expireIfGreater";
            case "LT": return "expireIfLess";
            default: throw new IllegalArgumentException("bad expire flag " + flag);
        }
    }

    /**
     * The tick of the client's HashedWheelTimer in ms, -1 if not found.
     * Redisson 3.25.1 and later schedule a refused acquire's retry on that
     * timer, so the retry comes at the first tick after the hint. The tick
     * is set at start: 100 ms up to 3.48, and from 3.49 on from a random
     * draw of the retry delay (10-49 ms mostly). Versions before 3.25.1
     * retry on Netty's event loop and never use it for that.
     */
    private long timerTickMillis() {
        try {
            Object ce = redisson.getClass().getMethod("getCommandExecutor").invoke(redisson);
            for (String m : new String[] {"getServiceManager", "getConnectionManager"}) {
                try {
                    Object timer = fieldOfType(ce.getClass().getMethod(m).invoke(ce), "io.netty.util.HashedWheelTimer");
                    if (timer != null) {
                        java.lang.reflect.Field f = timer.getClass().getDeclaredField("tickDuration");
                        f.setAccessible(true);
                        return TimeUnit.NANOSECONDS.toMillis((Long) f.get(timer));
                    }
                } catch (NoSuchMethodException e) {
                    // try the next holder
                }
            }
        } catch (Throwable e) {
            System.err.println("timerTick: " + e);
        }
        return -1;
    }

    private static Object fieldOfType(Object o, String type) throws IllegalAccessException {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            for (java.lang.reflect.Field f : c.getDeclaredFields()) {
                if (f.getType().getName().equals(type)) {
                    f.setAccessible(true);
                    return f.get(o);
                }
            }
        }
        return null;
    }

    private String handle(String[] a) throws Throwable {
        String cmd = a[0];
        if (cmd.equals("ping")) {
            return " pong";
        }
        if (cmd.equals("id")) {
            return " " + redisson.getId();
        }
        if (cmd.equals("now")) {
            return " " + System.currentTimeMillis();
        }
        if (cmd.equals("timerTick")) {
            return " " + timerTickMillis();
        }
        need(a, 2);
        RRateLimiter rl = redisson.getRateLimiter(a[1]);
        switch (cmd) {
            case "name":
                return " " + rl.getName();
            case "trySetRate": {
                need(a, 5);
                RateType m = mode(a[2]);
                long rate = Long.parseLong(a[3]);
                long interval = Long.parseLong(a[4]);
                if (a.length > 5) {
                    Object r = call(rl, "trySetRate", new Class<?>[] {RateType.class, long.class, Duration.class, Duration.class},
                            m, rate, Duration.ofMillis(interval), Duration.ofMillis(Long.parseLong(a[5])));
                    return " " + r;
                }
                return " " + rl.trySetRate(m, rate, interval, RateIntervalUnit.MILLISECONDS);
            }
            case "setRate": {
                need(a, 5);
                RateType m = mode(a[2]);
                long rate = Long.parseLong(a[3]);
                long interval = Long.parseLong(a[4]);
                if (a.length > 5) {
                    call(rl, "setRate", new Class<?>[] {RateType.class, long.class, Duration.class, Duration.class},
                            m, rate, Duration.ofMillis(interval), Duration.ofMillis(Long.parseLong(a[5])));
                } else {
                    rl.setRate(m, rate, interval, RateIntervalUnit.MILLISECONDS);
                }
                return "";
            }
            case "setRateArgs":
            case "updateRate": {
                need(a, 7);
                Object args = rateLimiterArgs(mode(a[2]), Long.parseLong(a[3]), Long.parseLong(a[4]),
                        Long.parseLong(a[5]), Boolean.parseBoolean(a[6]));
                Class<?> ac = cls("org.redisson.api.ratelimiter.RateLimiterArgs");
                if (cmd.equals("setRateArgs")) {
                    call(rl, "setRate", new Class<?>[] {ac}, args);
                    return "";
                }
                return " " + call(rl, "updateRate", new Class<?>[] {ac}, args);
            }
            case "tryAcquire":
                need(a, 3);
                return " " + rl.tryAcquire(Long.parseLong(a[2]));
            case "tryAcquireTimeout":
                need(a, 4);
                return " " + rl.tryAcquire(Long.parseLong(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS);
            case "acquire":
                need(a, 3);
                rl.acquire(Long.parseLong(a[2]));
                return "";
            case "release":
                need(a, 3);
                call(rl, "release", new Class<?>[] {long.class}, Long.parseLong(a[2]));
                return "";
            case "availablePermits":
                return " " + rl.availablePermits();
            case "getConfig": {
                RateLimiterConfig c = rl.getConfig();
                return " " + c.getRateType() + " " + c.getRate() + " " + c.getRateInterval();
            }
            case "expire": {
                need(a, 3);
                long ms = Long.parseLong(a[2]);
                if (a.length > 3) {
                    return " " + call(rl, expireMethod(a[3]), new Class<?>[] {Duration.class}, Duration.ofMillis(ms));
                }
                return " " + rl.expire(ms, TimeUnit.MILLISECONDS);
            }
            case "expireAt": {
                need(a, 3);
                long at = Long.parseLong(a[2]);
                if (a.length > 3) {
                    return " " + call(rl, expireMethod(a[3]), new Class<?>[] {Instant.class}, Instant.ofEpochMilli(at));
                }
                return " " + rl.expireAt(at);
            }
            case "clearExpire":
                return " " + rl.clearExpire();
            case "remainTimeToLive":
                return " " + rl.remainTimeToLive();
            case "delete":
                return " " + rl.delete();
            case "isExists":
                return " " + rl.isExists();
            case "load":
                need(a, 6);
                return load(rl, Integer.parseInt(a[2]), Long.parseLong(a[3]), a[4], Long.parseLong(a[5]));
            case "bench":
                need(a, 3);
                return bench(rl, Integer.parseInt(a[2]));
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    /**
     * Runs threads that acquire on one limiter as fast as they can for durationMs.
     * In "try" mode each grant's time is the wall clock read just before the
     * tryAcquire call that was granted (Redisson reads its clock for the score
     * right after); in "acquire" mode it is the wall clock when acquire returned.
     * Answer: " <count> <t1> <t2> ..." (epoch ms, sorted).
     */
    private String load(RRateLimiter rl, int threads, long durationMs, String how, long permits) throws Exception {
        boolean blocking;
        switch (how) {
            case "try": blocking = false; break;
            case "acquire": blocking = true; break;
            default: throw new IllegalArgumentException("load mode must be try or acquire");
        }
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        CountDownLatch start = new CountDownLatch(1);
        long[] deadline = new long[1];
        long[][] results = new long[threads][];
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            final int idx = i;
            Thread t = new Thread(() -> {
                long[] buf = new long[1024];
                int n = 0;
                try {
                    start.await();
                    while (System.currentTimeMillis() < deadline[0]) {
                        long t0 = System.currentTimeMillis();
                        boolean ok;
                        if (blocking) {
                            rl.acquire(permits);
                            t0 = System.currentTimeMillis();
                            ok = true;
                        } else {
                            ok = rl.tryAcquire(permits);
                        }
                        if (ok) {
                            if (n == buf.length) {
                                buf = java.util.Arrays.copyOf(buf, n * 2);
                            }
                            buf[n++] = t0;
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                } finally {
                    results[idx] = java.util.Arrays.copyOf(buf, n);
                }
            }, "load-" + i);
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
        List<Long> all = new ArrayList<>();
        for (long[] r : results) {
            for (long v : r) {
                all.add(v);
            }
        }
        java.util.Collections.sort(all);
        StringBuilder sb = new StringBuilder();
        sb.append(' ').append(all.size());
        for (long v : all) {
            sb.append(' ').append(v);
        }
        return sb.toString();
    }

    /** Calls tryAcquire(1) n times in a row. Answer: " <granted> <refused> <elapsedNanos>". */
    private String bench(RRateLimiter rl, int n) {
        long granted = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            if (rl.tryAcquire(1)) {
                granted++;
            }
        }
        long el = System.nanoTime() - t0;
        return " " + granted + " " + (n - granted) + " " + el;
    }
}
