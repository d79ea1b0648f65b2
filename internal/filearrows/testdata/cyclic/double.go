package cyclic

func double(n int) int { return clamp(n) * 2 }
