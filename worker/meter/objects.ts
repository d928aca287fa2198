/**
 * The meter, applied once around each Durable Object class and around the Worker entry
 * (worker/index.ts), instead of inside each constructor and handler.
 *
 * DESCRIPTION
 *   meterClass(cls, Impl)  the class to export in Impl's place. Where METER is "on", each object
 *                        it makes gets, before Impl's constructor runs, a state whose storage
 *                        is metered (sql.ts: rows read and written, setAlarm as a row) and
 *                        whose waitUntil and blockConcurrencyWhile keep its Activity open, and
 *                        the metered env (meter.ts); every call of one of its methods from
 *                        outside (an RPC, an alarm) counts as a DO request of `cls` (alarms
 *                        also as alarms) and runs inside the object's Activity (activity.ts).
 *                        A method the object calls on itself is not a request. The state
 *                        object stays the runtime's own (workerd's DurableObject constructor
 *                        accepts no other): its `storage`, `waitUntil` and
 *                        `blockConcurrencyWhile` are replaced on that object.
 *                        Where the meter is off the object is made exactly as Impl makes it.
 *   meterWorker(handlers)  the Worker's handlers, each invocation counted and given the metered
 *                        env (meterFetch, meterQueue, meterScheduled, meterEmail).
 *
 * INVARIANTS
 *   Methods named dev* are the meter's own observation (GET /relay/dev/rows): never counted.
 *   Counting never changes what a method returns or when.
 */
import { meterEmail, meterFetch, meterOn, meterQueue, meterScheduled } from "./invocations";
import { meterEnv } from "./meter";
import { meterStorage } from "./sql";
import { activityOf, current, type Activity } from "./activity";
import { add, reg, type DoClass } from "./registry";

type ObjectClass = abstract new (ctx: DurableObjectState, env: Env) => object;

const activities = new WeakMap<object, Activity>();
const wrapped = new WeakSet<object>();

/** The class to export for Impl (see the header). */
export function meterClass<C extends ObjectClass>(cls: DoClass, Impl: C): C {
  return new Proxy(Impl, {
    construct(target, args, newTarget) {
      const [ctx, env] = args as [DurableObjectState, Env];
      if (!meterOn(env)) return Reflect.construct(target, args, newTarget) as object;
      wrapMethods(target.prototype as object, cls);
      const name = ctx.id.name ?? ctx.id.toString();
      const activity = activityOf(cls, name);
      meterState(ctx, cls, name, activity);
      // What the constructor starts (blockConcurrencyWhile, timers) is the object's.
      const obj = current.run(activity, () => Reflect.construct(target, [ctx, meterEnv(env)], newTarget) as object);
      activities.set(obj, activity);
      return obj;
    },
  });
}

/** Replaces the state's storage, waitUntil and blockConcurrencyWhile with metered ones, on the state itself. */
function meterState(ctx: DurableObjectState, cls: DoClass, name: string, activity: Activity): void {
  const storage = meterStorage(ctx.storage, cls, `${cls}/${name}`);
  const waitUntil = ctx.waitUntil.bind(ctx);
  const block = ctx.blockConcurrencyWhile.bind(ctx);
  const own = (name: string, value: unknown) =>
    Object.defineProperty(ctx, name, { value, configurable: true, writable: true });
  own("storage", storage);
  own("waitUntil", (p: Promise<unknown>) => waitUntil(activity.track(p)));
  own("blockConcurrencyWhile", <T>(f: () => Promise<T>) => block(() => activity.track(current.run(activity, f))));
}

/** Wraps the methods of a class's own prototype once (the DO classes extend the runtime's DurableObject directly). */
function wrapMethods(proto: object, cls: DoClass): void {
  if (wrapped.has(proto)) return;
  wrapped.add(proto);
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === "constructor" || name.startsWith("dev")) continue;
    const d = Object.getOwnPropertyDescriptor(proto, name);
    if (!d || typeof d.value !== "function") continue;
    Object.defineProperty(proto, name, { ...d, value: counted(cls, name, d.value as (...a: unknown[]) => unknown) });
  }
}

function counted(cls: DoClass, name: string, f: (...a: unknown[]) => unknown): (...a: unknown[]) => unknown {
  return function (this: object, ...args: unknown[]): unknown {
    const a = activities.get(this);
    // Not metered, or a call from inside the object's own work: not a request.
    if (!a || current.getStore() === a) return Reflect.apply(f, this, args);
    add(reg.do_requests, cls, 1);
    add(reg.do_methods, `${cls}.${name}`, 1);
    add(reg.do_requests_by_object, `${cls}/${a.name}`, 1);
    if (name === "alarm") add(reg.do_alarms, cls, 1);
    a.enter();
    let out: unknown;
    try {
      out = current.run(a, () => Reflect.apply(f, this, args));
    } catch (e) {
      a.leave();
      throw e;
    }
    if (out instanceof Promise)
      out.then(
        () => a.leave(),
        () => a.leave(),
      );
    else a.leave();
    return out;
  };
}

type Handlers = Required<Pick<ExportedHandler<Env>, "fetch" | "queue" | "scheduled" | "email">>;

/** The Worker's handlers, each given the metered env (see the header). */
export function meterWorker(h: Handlers): Handlers {
  return {
    fetch: (request, env, ctx) => h.fetch(request, meterFetch(request, env), ctx),
    queue: (batch, env, ctx) => meterQueue(batch, env, async (b, metered) => h.queue(b, metered, ctx)),
    scheduled: (controller, env, ctx) => h.scheduled(controller, meterScheduled(env), ctx),
    email: (message, env, ctx) => h.email(message, meterEmail(env), ctx),
  };
}
