package kubeauth

import (
	"container/list"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ttlCache maps keys to values that expire ttl after they were added, and holds at most capacity
// entries. Every entry lives for the same ttl, so the order of insertion is the order of expiry:
// the list keeps the entries oldest first, expired entries are dropped from its front on every
// add, and when the cache is still full the oldest live entry makes room.
type ttlCache[K comparable, V any] struct {
	clock    clock.PassiveClock
	ttl      time.Duration
	capacity int

	mu      sync.Mutex
	entries map[K]*list.Element // values are *cacheEntry[K, V]
	order   *list.List          // oldest first
}

type cacheEntry[K comparable, V any] struct {
	key     K
	value   V
	expires time.Time
}

// newTTLCache returns an empty cache. A ttl <= 0 or a capacity <= 0 makes a cache that keeps
// nothing.
func newTTLCache[K comparable, V any](clk clock.PassiveClock, ttl time.Duration, capacity int) *ttlCache[K, V] {
	return &ttlCache[K, V]{clock: clk, ttl: ttl, capacity: capacity, entries: map[K]*list.Element{}, order: list.New()}
}

// get returns the value of key if it is there and has not expired.
func (c *ttlCache[K, V]) get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*cacheEntry[K, V])
	if !c.clock.Now().Before(e.expires) {
		c.remove(el)
		var zero V
		return zero, false
	}
	return e.value, true
}

// add stores value under key for ttl, replacing an entry of the same key.
func (c *ttlCache[K, V]) add(key K, value V) {
	if c.ttl <= 0 || c.capacity <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	for el := c.order.Front(); el != nil && !now.Before(el.Value.(*cacheEntry[K, V]).expires); el = c.order.Front() {
		c.remove(el)
	}
	for c.order.Len() >= c.capacity {
		c.remove(c.order.Front())
	}
	c.entries[key] = c.order.PushBack(&cacheEntry[K, V]{key: key, value: value, expires: now.Add(c.ttl)})
}

// len is the number of entries held, expired or not.
func (c *ttlCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *ttlCache[K, V]) remove(el *list.Element) {
	delete(c.entries, el.Value.(*cacheEntry[K, V]).key)
	c.order.Remove(el)
}
