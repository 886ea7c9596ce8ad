# Shared by the Podvirt demo guest scripts.
# say prints a line on the console, and on the serial port too when the console is elsewhere
# (kernelArgs without console=ttyS0), so the serial log always shows the guest's progress.
say() {
	echo "$*" >/dev/console
	case "$(cat /sys/class/tty/console/active 2>/dev/null)" in
	*ttyS0*) ;;
	*) [ -c /dev/ttyS0 ] && echo "$*" >/dev/ttyS0 ;;
	esac
}
