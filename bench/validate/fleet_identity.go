package validate

import (
	"fmt"
	"strings"
)

// IdentityConflict is an identity two cards share (or a card lacks), with every place it is.
type IdentityConflict struct {
	Kind    string      `json:"kind"` // "uuid", "empty_uuid", "serial" or "pci_bus_id"
	Value   string      `json:"value"`
	Places  []CardPlace `json:"places"`
	Message string      `json:"message"`
}

// CardPlace is where a card reported from: its box, NVML index and bus id.
type CardPlace struct {
	Host     string `json:"host"`
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	PCIBusID string `json:"pci_bus_id"`
}

func (p CardPlace) String() string { return fmt.Sprintf("%s GPU %d (%s)", p.Host, p.Index, p.PCIBusID) }

// identityConflicts flags what makes a card's identity untrustworthy: a UUID on several cards
// (in one box or across boxes: a cloned or misread identity), an empty UUID, and a serial or a
// PCI bus id twice within one box. Baselines and outliers are keyed by these, so a duplicate
// could otherwise hide a card.
func (s *FleetSummary) identityConflicts() {
	place := func(c FleetCard) CardPlace {
		return CardPlace{Host: c.Host, Index: c.Index, UUID: c.UUID, PCIBusID: c.PCIBusID}
	}
	names := func(ps []CardPlace) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.String())
		}
		return strings.Join(out, " and ")
	}
	group := func(kind string, key func(FleetCard) string) {
		by := map[string][]CardPlace{}
		var order []string
		for _, c := range s.Cards {
			k := key(c)
			if k == "" {
				continue
			}
			if _, ok := by[k]; !ok {
				order = append(order, k)
			}
			by[k] = append(by[k], place(c))
		}
		for _, k := range order {
			ps := by[k]
			if len(ps) < 2 {
				continue
			}
			_, value, _ := strings.Cut(k, "\x00")
			if kind == "uuid" {
				value = k
			}
			s.IdentityConflicts = append(s.IdentityConflicts, IdentityConflict{Kind: kind, Value: value, Places: ps,
				Message: fmt.Sprintf("%s %s is reported by %s: a card's identity is cloned or misread, so its results cannot be told apart; check each card with nvidia-smi -q", kind, value, names(ps))})
		}
	}
	group("uuid", func(c FleetCard) string { return c.UUID })
	for _, c := range s.Cards {
		if strings.TrimSpace(c.UUID) == "" {
			ps := []CardPlace{place(c)}
			s.IdentityConflicts = append(s.IdentityConflicts, IdentityConflict{Kind: "empty_uuid", Places: ps,
				Message: fmt.Sprintf("%s reports an empty UUID: its identity cannot be checked nor compared with a baseline; check it with nvidia-smi -q", names(ps))})
		}
	}
	group("serial", func(c FleetCard) string {
		if c.Serial == "" {
			return ""
		}
		return c.Host + "\x00" + c.Serial
	})
	group("pci_bus_id", func(c FleetCard) string {
		if c.PCIBusID == "" {
			return ""
		}
		return c.Host + "\x00" + c.PCIBusID
	})
}
