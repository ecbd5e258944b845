// Package sshexec runs steps — shell commands — on hosts over SSH (golang.org/x/crypto/ssh), for
// the Binary Provisioning Agent.
//
// An Executor authenticates with a Signer made in memory from a private key read from the secret
// store (ParseSigner); the key is never written to a file. Host keys are pinned on first
// contact, when the host was just provisioned, in a HostKeyStore the caller provides
// (StoredHostKeys keeps them in the secret store, so they outlive the agent; MemoryHostKeys for
// one process); a later connection that is offered any other key is refused with a
// *HostKeyError naming the host and both fingerprints. Host keys are never ignored.
//
// Each step runs in a session of its own under a timeout (its own, or the executor's default).
// Steps share connections: the executor keeps one to each host for its next steps, at most
// StepsPerConnection steps at once on one, for MaxIdle after the last (a connection per step
// would cost a login — a handshake and a process tree on the host — each time). A kept
// connection serves a step only while the key it was dialed with is still the one pinned for
// the host; one that opens no session any more (the host rebooted or froze) is dropped and the
// step dials again, once. When a step's timeout passes its command is signalled and its
// processes killed through another session; a host that does not answer that within 5 seconds
// loses the connection. Close ends the kept connections. Standard output
// and error are captured up to a bound (the last bytes are kept, the count of dropped bytes is
// reported). A step that exits non-zero returns an *ExitError with its exit status and the end
// of its standard error.
//
// Steps must be idempotent, so that an agent restarted mid-way simply runs them again; a step
// may carry a Check command that, when it exits 0, marks the step done already and skips it.
// RunAll runs one step on many hosts with bounded parallelism; one host's failure or timeout
// never holds up the others.
package sshexec
