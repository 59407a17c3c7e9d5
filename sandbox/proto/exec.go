package proto

// Commands without the model's shaping (version 3).
//
// A StartMsg with Pipes runs its command without a terminal: its stdin,
// stdout and stderr are pipes. Stdout travels in Data frames under the
// stream's Credit window, as a terminal's output does; stderr travels in
// Stderr frames under a window of its own, OutputWindow bytes, which the host
// opens with StderrCredit. With Stdin set, the host sends the command's input
// in Input frames within InputWindow (the agent returns Credit as it writes
// them to the pipe) and ends it with InputEnd; without it, stdin is empty.
const (
	Stderr       Type = 21 // agent→host: bytes the command wrote to its stderr (Pipes)
	StderrCredit Type = 22 // host→agent: 4-byte count of Stderr bytes consumed
	InputEnd     Type = 23 // host→agent, empty: the command's stdin ends (Pipes)
)
