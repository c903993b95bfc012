// Trusted glue, run once per engine instance before any handler code, in a context that was
// created without the `eval` intrinsic. It locks the realm down and returns the two functions
// the Rust side calls: `invoke` (run one contract function) and `describe` (turn a thrown value
// into text without running handler code where it can be avoided).
//
// Evaluates to [invoke, describe, settersLeft, objectPrototypeKeys].
(function lockdown() {
  "use strict";
  const g = globalThis;
  const {
    defineProperty, freeze, getOwnPropertyDescriptor, getPrototypeOf, isFrozen,
  } = Object;
  const { apply, construct, ownKeys } = Reflect;
  const jsonStringify = JSON.stringify;
  const rangeErrorPrototype = RangeError.prototype;
  const errorPrototype = Error.prototype;
  const stackGetter = getOwnPropertyDescriptor(errorPrototype, "stack").get;
  const NAMES = ["encodeRequest", "decodeResponse", "decodeRequest", "encodeResponse"];

  // 1. Nothing that blocks, shares memory, compiles code at run time or computes without
  //    interruption. (Without the Eval intrinsic `eval` and every Function constructor already
  //    throw.) BigInt goes with everything that can make one; the literals are refused when
  //    the module is loaded.
  for (const name of ["eval", "SharedArrayBuffer", "Atomics", "BigInt", "BigInt64Array",
                      "BigUint64Array"]) {
    delete g[name];
  }
  for (const name of ["getBigInt64", "getBigUint64", "setBigInt64", "setBigUint64"]) {
    delete DataView.prototype[name];
  }

  // 2. Determinism: handlers are pure functions of their input. Anything that would differ
  //    between two runs (clock, randomness) throws with a message saying what to do instead.
  const unavailable = (what) => function () {
    throw new TypeError(what + " is not available in the handler sandbox: handlers must be " +
      "deterministic; take ids and timestamps from the input");
  };
  defineProperty(Math, "random", { value: unavailable("Math.random()"), writable: false });
  const RealDate = Date;
  const dateNow = unavailable("Date.now()");
  const noArgDate = unavailable("new Date() without arguments");
  const SandboxDate = function Date(...args) {
    if (new.target === undefined) {
      return dateNow();
    }
    if (args.length === 0) {
      return noArgDate();
    }
    return construct(RealDate, args, new.target);
  };
  defineProperty(SandboxDate, "prototype", { value: RealDate.prototype, writable: false });
  defineProperty(RealDate.prototype, "constructor", { value: SandboxDate });
  defineProperty(SandboxDate, "length", { value: 7 });
  SandboxDate.UTC = RealDate.UTC;
  SandboxDate.parse = RealDate.parse;
  SandboxDate.now = dateNow;
  defineProperty(g, "Date", { value: SandboxDate, writable: true, configurable: true });

  // 3. `console` exists so that a stray `console.log` in generated code does not fail the
  //    call; it has no output, so its methods discard their arguments.
  const discard = function () {};
  defineProperty(g, "console", {
    value: { log: discard, info: discard, warn: discard, error: discard, debug: discard,
             trace: discard },
    writable: true, configurable: true,
  });

  // 4. Accessors whose setters write hidden per-context state (V8-style stack hooks) become
  //    plain constants; otherwise one call could install a hook that a later call sees.
  defineProperty(Error, "prepareStackTrace", { value: undefined });
  defineProperty(Error, "stackTraceLimit", { value: 10 });

  // 5. Freeze everything handler code can reach without creating it itself: the global object
  //    and, transitively, every property, accessor and prototype of every intrinsic, including
  //    the intrinsics only reachable through syntax.
  const roots = [
    g,
    getPrototypeOf(function* () {}),
    getPrototypeOf(async function () {}),
    getPrototypeOf(async function* () {}),
    getPrototypeOf([][Symbol.iterator]()),
    getPrototypeOf(new Map()[Symbol.iterator]()),
    getPrototypeOf(new Set()[Symbol.iterator]()),
    getPrototypeOf(""[Symbol.iterator]()),
    getPrototypeOf(/(?:)/[Symbol.matchAll]("")),
    getPrototypeOf([].values().map((x) => x)),
    getPrototypeOf(Iterator.from({ next() { return { done: true }; } })),
    getPrototypeOf(Int8Array),
    getOwnPropertyDescriptor(function () { return arguments; }(), "callee").get,
  ];
  // %ThrowTypeError%: the poisoned accessor of `caller`/`arguments`; its setter only throws.
  const throwTypeError = roots[roots.length - 1];
  const settersLeft = [];
  const seen = new Set();
  const pending = roots.slice();
  while (pending.length > 0) {
    const object = pending.pop();
    if ((typeof object !== "object" && typeof object !== "function") || object === null ||
        seen.has(object)) {
      continue;
    }
    seen.add(object);
    freeze(object);
    pending.push(getPrototypeOf(object));
    for (const key of ownKeys(object)) {
      const descriptor = getOwnPropertyDescriptor(object, key);
      if ("value" in descriptor) {
        pending.push(descriptor.value);
      } else {
        pending.push(descriptor.get, descriptor.set);
        if (descriptor.set !== undefined && descriptor.set !== throwTypeError) {
          settersLeft.push(key);
        }
      }
    }
  }
  if (!isFrozen(g)) {
    throw new Error("lockdown failed: the global object is not frozen");
  }

  // Runs one contract function on a fresh instance of the module's top-level scope.
  function invoke(factory, index, input) {
    const functions = factory();
    const fn = functions[index];
    if (typeof fn !== "function") {
      throw new TypeError(NAMES[index] + " is not defined as a function by the handler module");
    }
    return fn(input);
  }

  // Own data property, never a getter.
  function dataProperty(object, key) {
    const descriptor = getOwnPropertyDescriptor(object, key);
    return descriptor !== undefined && "value" in descriptor ? descriptor.value : undefined;
  }

  // Data property found along the prototype chain, never a getter.
  function inheritedDataProperty(object, key) {
    for (let current = object; current !== null; current = getPrototypeOf(current)) {
      const descriptor = getOwnPropertyDescriptor(current, key);
      if (descriptor !== undefined) {
        return "value" in descriptor ? descriptor.value : undefined;
      }
    }
    return undefined;
  }

  function inheritsFrom(object, prototype) {
    for (let current = getPrototypeOf(object); current !== null; current = getPrototypeOf(current)) {
      if (current === prototype) {
        return true;
      }
    }
    return false;
  }

  // Returns [isStackOverflow, text, stack].
  function describe(thrown) {
    const type = typeof thrown;
    if (thrown === null || (type !== "object" && type !== "function")) {
      const shown = type === "string" ? jsonStringify(thrown) : type === "symbol"
        ? thrown.toString() : String(thrown);
      return [false, "uncaught " + (thrown === null ? "null" : type) + " value: " + shown, ""];
    }
    const message = dataProperty(thrown, "message");
    if (getPrototypeOf(thrown) === rangeErrorPrototype &&
        message === "Maximum call stack size exceeded") {
      return [true, "", ""];
    }
    if (inheritsFrom(thrown, errorPrototype)) {
      const name = inheritedDataProperty(thrown, "name");
      const text = (typeof name === "string" ? name : "Error") +
        (typeof message === "string" && message !== "" ? ": " + message : "");
      const ownStack = dataProperty(thrown, "stack");
      const stack = typeof ownStack === "string" ? ownStack : apply(stackGetter, thrown, []);
      return [false, text, typeof stack === "string" ? stack : ""];
    }
    // A plain object: show it as JSON. This may run the module's getters or toJSON, still
    // under the call's deadline and memory cap.
    let shown;
    try {
      shown = jsonStringify(thrown);
    } catch (error) {
      shown = undefined;
    }
    return [false, "uncaught " + type + " value: " + (typeof shown === "string" ? shown
      : "(not representable as JSON)"), ""];
  }

  return [invoke, describe, settersLeft.map(String), Object.getOwnPropertyNames(Object.prototype)];
})()
