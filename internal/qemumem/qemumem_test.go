package qemumem

import (
	"strings"
	"testing"
)

// An excerpt of a real qemu smaps (62 MiB guest) with a malloc arena of a similar size next to the
// guest RAM: only the rw-p mapping of the guest's size is guest RAM.
const sample = `7f0000000000-7f0003e00000 ---p 00000000 00:00 0
Size:              63488 kB
Rss:                   0 kB
Anonymous:             0 kB
7f1000000000-7f1003e00000 rw-p 00000000 00:00 0
Size:              63488 kB
Rss:               36864 kB
Anonymous:         36864 kB
7f2000000000-7f2002000000 rwxp 00000000 00:00 0
Size:              32768 kB
Rss:               32768 kB
Anonymous:         32768 kB
7f3000000000-7f3000100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                1024 kB
Anonymous:          1024 kB
55d000000000-55d000a00000 r-xp 00000000 fe:00 123 /usr/bin/qemu-system-x86_64
Size:              10240 kB
Rss:                8192 kB
Anonymous:             0 kB
`

func TestSplitQemu(t *testing.T) {
	maps, err := ParseSmaps(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 5 || maps[4].Path != "/usr/bin/qemu-system-x86_64" {
		t.Fatalf("parsed %+v", maps)
	}
	q, err := SplitQemu(maps, 62<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := Qemu{GuestTouched: 36 << 20, TCG: 32 << 20, Own: 1 << 20, Files: 8 << 20}
	if q != want {
		t.Fatalf("SplitQemu = %+v, want %+v", q, want)
	}
	if _, err := SplitQemu(maps, 128<<20); err == nil {
		t.Fatal("a guest size with no matching mapping must be an error")
	}
}
