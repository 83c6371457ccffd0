package units

import "testing"

func TestBytes(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0 B"}, {512, "512 B"}, {131072, "131.1 kB"}, {58.74e6, "58.74 MB"},
		{15.01e9, "15.01 GB"}, {1.1e12, "1.10 TB"},
	}
	for _, c := range cases {
		if got := Bytes(c.in); got != c.want {
			t.Errorf("Bytes(%g) = %q, want %q", c.in, got, c.want)
		}
	}
}
