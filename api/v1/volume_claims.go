package v1

// Claim is the PersistentVolumeClaim behind a volume: a persistentVolumeClaim volume's claim, or
// the claim a dataVolume volume's DataVolume provisions (CDI gives it the DataVolume's name). ok is
// false for every other source.
func (v *Volume) Claim() (name string, readOnly, ok bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, v.PersistentVolumeClaim.ReadOnly, true
	case v.DataVolume != nil:
		return v.DataVolume.Name, false, true
	}
	return "", false, false
}
