//go:build !unix

package ps

func isEINVAL(error) bool { return false }
