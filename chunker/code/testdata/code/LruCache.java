package org.example.cache;

import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * A least-recently-used cache with a fixed capacity.
 *
 * <p>Not thread-safe: callers synchronise.
 */
public final class LruCache<K, V> {

    /** A doubly linked node, most recently used at the head. */
    private static final class Node<K, V> {
        final K key;
        V value;
        Node<K, V> prev;
        Node<K, V> next;

        Node(K key, V value) {
            this.key = key;
            this.value = value;
        }
    }

    private final int capacity;
    private final Map<K, Node<K, V>> index = new HashMap<>();
    private Node<K, V> head; // most recent
    private Node<K, V> tail; // least recent
    private long hits;
    private long misses;

    public LruCache(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive: " + capacity);
        }
        this.capacity = capacity;
    }

    public V get(K key) {
        Node<K, V> node = index.get(key);
        if (node == null) {
            misses++;
            return null;
        }
        hits++;
        moveToHead(node);
        return node.value;
    }

    public V computeIfAbsent(K key, Function<? super K, ? extends V> loader) {
        V value = get(key);
        if (value == null) {
            value = Objects.requireNonNull(loader.apply(key), "loader returned null");
            put(key, value);
        }
        return value;
    }

    public void put(K key, V value) {
        Node<K, V> node = index.get(key);
        if (node != null) {
            node.value = value;
            moveToHead(node);
            return;
        }
        node = new Node<>(key, value);
        index.put(key, node);
        addHead(node);
        if (index.size() > capacity) {
            // Evict the least recently used entry.
            Node<K, V> evicted = tail;
            unlink(evicted);
            index.remove(evicted.key);
        }
    }

    public int size() {
        return index.size();
    }

    public double hitRate() {
        long total = hits + misses;
        return total == 0 ? 0.0 : (double) hits / total;
    }

    private void moveToHead(Node<K, V> node) {
        if (node == head) {
            return;
        }
        unlink(node);
        addHead(node);
    }

    private void addHead(Node<K, V> node) {
        node.prev = null;
        node.next = head;
        if (head != null) {
            head.prev = node;
        }
        head = node;
        if (tail == null) {
            tail = node;
        }
    }

    private void unlink(Node<K, V> node) {
        if (node.prev != null) {
            node.prev.next = node.next;
        } else {
            head = node.next;
        }
        if (node.next != null) {
            node.next.prev = node.prev;
        } else {
            tail = node.prev;
        }
        node.prev = null;
        node.next = null;
    }

    @Override
    public String toString() {
        return "LruCache[size=" + size() + ", capacity=" + capacity + ", hitRate=" + hitRate() + "]";
    }
}

interface Loader<K, V> {
    V load(K key) throws Exception;
}

enum Policy {
    LRU,
    FIFO;

    boolean refreshesOnRead() {
        return this == LRU;
    }
}
