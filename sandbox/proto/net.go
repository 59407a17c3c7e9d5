package proto

import (
	"encoding/binary"
	"fmt"
)

// Relayed network connections (egress).
//
// When the host sends NetListen after the hello, the agent listens on the
// loopback addresses it names inside the sandbox (the sandbox has no other
// network) and answers NetListen with the error, if any. Each connection a
// command makes to one of them is a stream the agent opens with NetOpen, under
// an id with NetStreamBit set (the host's ids never have it, so the two never
// meet). Its bytes go both ways in NetData frames, each way with at most
// NetWindow bytes in flight: the receiver sends NetCredit as its reader
// consumes them. NetEnd says its sender sends no more data (NetEOF, a
// half-close) or is gone altogether (NetClose).
const (
	NetListen Type = 16 // host→agent, stream 0: NetListenMsg; answered with the same type
	NetOpen   Type = 17 // agent→host: NetOpenMsg, opens a stream
	NetData   Type = 18 // both ways: bytes of a relayed connection
	NetCredit Type = 19 // both ways: 4-byte count of NetData bytes consumed
	NetEnd    Type = 20 // both ways: one byte, NetEOF or NetClose
)

// NetStreamBit is set in the id of every stream the agent opens.
const NetStreamBit = 1 << 31

// Payloads of NetEnd.
const (
	NetEOF   byte = 0
	NetClose byte = 1
)

// NetListenMsg asks the agent to listen (host→agent), and answers (agent→host,
// with Error set when it could not).
type NetListenMsg struct {
	// HTTP is the address of the HTTP proxy's listener, "127.0.0.1:3128".
	HTTP string `json:"http,omitempty"`
	// SOCKS is the address of the SOCKS5 proxy's listener.
	SOCKS string `json:"socks,omitempty"`
	Error string `json:"error,omitempty"`
}

// NetOpenMsg opens a relayed connection.
type NetOpenMsg struct {
	// Listener is "http" or "socks": which listener accepted the connection.
	Listener string `json:"listener"`
}

// NetCreditFrame encodes a credit of n bytes for a relayed connection.
func NetCreditFrame(stream uint32, n int) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(n))
	return AppendFrame(make([]byte, 0, HeaderSize+4), NetCredit, stream, p[:])
}

// NetEndFrame encodes the end of a relayed connection's data (close false) or
// of the connection (close true).
func NetEndFrame(stream uint32, close bool) []byte {
	b := NetEOF
	if close {
		b = NetClose
	}
	return AppendFrame(make([]byte, 0, HeaderSize+1), NetEnd, stream, []byte{b})
}

// ParseNetEnd decodes a NetEnd payload: true for NetClose.
func ParseNetEnd(p []byte) (bool, error) {
	if len(p) != 1 || p[0] > NetClose {
		return false, fmt.Errorf("%w: net end of %d bytes", ErrProtocol, len(p))
	}
	return p[0] == NetClose, nil
}
