/**
 * A typed cache with time-to-live entries and pluggable eviction.
 */
import { EventEmitter } from "events";

export type Key = string | number;

export interface Clock {
  now(): number;
}

export interface CacheOptions<V> {
  maxEntries: number;
  ttlMs?: number;
  clock?: Clock;
  onEvict?: (key: Key, value: V) => void;
}

export enum EvictionReason {
  Expired = "expired",
  Capacity = "capacity",
  Manual = "manual",
}

interface Entry<V> {
  value: V;
  expiresAt: number;
}

const systemClock: Clock = { now: () => Date.now() };

// Cache keeps at most maxEntries values, dropping the least recently used.
export class Cache<V> extends EventEmitter {
  private readonly entries = new Map<Key, Entry<V>>();
  private readonly clock: Clock;

  constructor(private readonly options: CacheOptions<V>) {
    super();
    if (options.maxEntries <= 0) {
      throw new RangeError("maxEntries must be positive");
    }
    this.clock = options.clock ?? systemClock;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: Key): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) {
      return undefined;
    }
    if (entry.expiresAt <= this.clock.now()) {
      this.evict(key, EvictionReason.Expired);
      return undefined;
    }
    // Re-insert to mark the entry as most recently used.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  set(key: Key, value: V, ttlMs = this.options.ttlMs ?? Infinity): this {
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: this.clock.now() + ttlMs });
    while (this.entries.size > this.options.maxEntries) {
      const oldest = this.entries.keys().next().value as Key;
      this.evict(oldest, EvictionReason.Capacity);
    }
    return this;
  }

  delete(key: Key): boolean {
    if (!this.entries.has(key)) {
      return false;
    }
    this.evict(key, EvictionReason.Manual);
    return true;
  }

  private evict(key: Key, reason: EvictionReason): void {
    const entry = this.entries.get(key);
    if (entry === undefined) {
      return;
    }
    this.entries.delete(key);
    this.options.onEvict?.(key, entry.value);
    this.emit("evict", key, reason);
  }
}

export namespace Caches {
  export const registry = new Map<string, Cache<unknown>>();

  export function named<V>(name: string, options: CacheOptions<V>): Cache<V> {
    let cache = registry.get(name) as Cache<V> | undefined;
    if (!cache) {
      cache = new Cache<V>(options);
      registry.set(name, cache as Cache<unknown>);
    }
    return cache;
  }
}

export function memoize<A extends Key, R>(fn: (arg: A) => R, cache = new Cache<R>({ maxEntries: 100 })) {
  return (arg: A): R => {
    const hit = cache.get(arg);
    if (hit !== undefined) {
      return hit;
    }
    const result = fn(arg);
    cache.set(arg, result);
    return result;
  };
}
