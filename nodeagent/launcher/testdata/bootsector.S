# A 512-byte guest for the launcher integration test: prints PODVIRT-BOOT-SECTOR-OK on COM1, then
# waits for the ACPI power button (PM1 status bit 8 at 0x600, enabled in PM1_EN at 0x602 — q35/ICH9 as
# SeaBIOS sets it up) and powers off (S5 via PM1_CNT at 0x604). So it boots in well under a second under
# TCG and answers a graceful shutdown like a real OS.
# Build: as --32 -o b.o bootsector.S && objcopy -O binary b.o bootsector.bin
.code16
.org 0
start:
  cli
  xor %ax,%ax
  mov %ax,%ds
  mov $msg+0x7c00,%si
1: lodsb
  test %al,%al
  jz 2f
  mov $0x3f8,%dx
  out %al,%dx
  jmp 1b
2:
  mov $0x602,%dx
  mov $0x100,%ax
  out %ax,%dx
3: mov $0x600,%dx
  in %dx,%ax
  test $0x100,%ax
  jz 3b
  mov $0x604,%dx
  mov $0x2000,%ax
  out %ax,%dx
4: hlt
  jmp 4b
msg: .asciz "PODVIRT-BOOT-SECTOR-OK\r\n"
.org 510
.byte 0x55,0xaa
