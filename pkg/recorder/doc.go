// Package recorder wraps an event recorder so that every Event it records fits the API server's
// limit on an Event's note: a longer note (an error of a whole bring-up, say) is cut, with a mark
// saying so, instead of the Event being refused and lost.
package recorder
