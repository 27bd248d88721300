//! English and Turkish: every text of every page, in both languages.
//!
//! The texts are one table ([`texts!`]): a key without its Turkish (or
//! English) text does not compile, and templates read them as fields
//! (`{{ t.sign_in_title }}`), so a misspelt key does not compile either.
//! [`KEYS`] lists them for the test that walks every key.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    En,
    Tr,
}

impl Lang {
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Tr => "tr",
        }
    }

    pub fn parse(s: &str) -> Option<Lang> {
        match s {
            "en" => Some(Lang::En),
            "tr" => Some(Lang::Tr),
            _ => None,
        }
    }

    pub fn texts(self) -> &'static Texts {
        match self {
            Lang::En => &EN,
            Lang::Tr => &TR,
        }
    }

    /// The best of ours in an `Accept-Language` header (RFC 9110 12.5.4:
    /// highest `q` first, a language range's primary tag); None when it
    /// names neither.
    pub fn negotiate(header: &str) -> Option<Lang> {
        let mut best: Option<(f32, Lang)> = None;
        for item in header.split(',').take(32) {
            let mut parts = item.split(';');
            let tag = parts.next().unwrap_or("").trim();
            let q = parts
                .find_map(|p| p.trim().strip_prefix("q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let primary = tag.split('-').next().unwrap_or("").to_ascii_lowercase();
            let Some(lang) = Lang::parse(&primary) else {
                continue;
            };
            if q > 0.0 && best.is_none_or(|(bq, _)| q > bq) {
                best = Some((q, lang));
            }
        }
        best.map(|(_, l)| l)
    }
}

macro_rules! texts {
    ($($key:ident: $en:literal, $tr:literal;)*) => {
        /// Every text of the console, in one language.
        pub struct Texts {
            $(pub $key: &'static str,)*
        }
        pub static EN: Texts = Texts { $($key: $en,)* };
        pub static TR: Texts = Texts { $($key: $tr,)* };
        /// Every key with its English and Turkish texts.
        pub const KEYS: &[(&str, &str, &str)] = &[$((stringify!($key), $en, $tr),)*];
    };
}

texts! {
    lang_name: "English", "Türkçe";
    other_lang: "Türkçe", "English";
    product: "Hub", "Hub";
    skip: "Skip to content", "İçeriğe geç";
    nav_label: "Main", "Ana menü";
    nav_orgs: "Organizations", "Organizasyonlar";
    sign_out: "Sign out", "Çıkış yap";
    signed_in_as: "Signed in as", "Oturum açık:";
    sign_in_title: "Sign in", "Giriş yap";
    sign_in_hint: "We will email you a link that signs you in. No password needed.", "Size giriş bağlantısı içeren bir e-posta göndereceğiz. Parola gerekmez.";
    email: "Email address", "E-posta adresi";
    send_link: "Email me a sign-in link", "Bana giriş bağlantısı gönder";
    check_mail_title: "Check your mail", "E-postanızı kontrol edin";
    check_mail_body: "If this address can sign in, a link is on its way. It works once, for 15 minutes, in this browser or another.", "Bu adresle giriş yapılabiliyorsa bağlantı yolda. Bağlantı bir kez ve 15 dakika boyunca geçerlidir.";
    landing_title: "Finish signing in", "Girişi tamamlayın";
    landing_body: "Continue to sign in on this device.", "Bu cihazda giriş yapmak için devam edin.";
    continue_: "Continue", "Devam";
    link_invalid: "This link is invalid, expired or already used.", "Bu bağlantı geçersiz, süresi dolmuş ya da daha önce kullanılmış.";
    link_while_signed_in: "You are already signed in. To use this link for another account, sign out first, then open the link again.", "Zaten giriş yapmış durumdasınız. Bu bağlantıyı başka bir hesap için kullanmak için önce çıkış yapın, sonra bağlantıyı yeniden açın.";
    request_new: "Request a new link", "Yeni bağlantı isteyin";
    mfa_title: "Two-step verification", "İki adımlı doğrulama";
    mfa_code: "Code from your authenticator app", "Doğrulama uygulamanızdaki kod";
    mfa_recovery: "Or one of your recovery codes", "Ya da kurtarma kodlarınızdan biri";
    verify: "Verify", "Doğrula";
    mfa_wrong: "That code did not work. Try again, or sign in again if it keeps failing.", "Kod kabul edilmedi. Tekrar deneyin; sorun sürerse yeniden giriş yapın.";
    orgs_title: "Organizations", "Organizasyonlar";
    orgs_empty: "You are not a member of any organization yet.", "Henüz hiçbir organizasyonun üyesi değilsiniz.";
    name: "Name", "Ad";
    country: "Country (two letters, e.g. TR, DE)", "Ülke (iki harf, ör. TR, DE)";
    country_short: "Country", "Ülke";
    legal_type: "Legal type", "Hukuki tür";
    legal_individual: "Individual", "Bireysel";
    legal_corporate: "Corporate", "Kurumsal";
    kyc_status: "Verification", "Doğrulama";
    kyc_unverified: "Not verified", "Doğrulanmadı";
    kyc_pending: "Under review", "İnceleniyor";
    kyc_verified: "Verified", "Doğrulandı";
    kyc_rejected: "Rejected", "Reddedildi";
    create_org: "Create an organization", "Organizasyon oluştur";
    create: "Create", "Oluştur";
    not_created: "The organization was not created:", "Organizasyon oluşturulamadı:";
    your_role: "Your role", "Rolünüz";
    status: "Status", "Durum";
    status_active: "Active", "Etkin";
    status_suspended: "Suspended", "Askıya alındı";
    members: "Members", "Üyeler";
    wallet: "Wallet", "Cüzdan";
    no_wallet: "No wallet", "Cüzdan yok";
    tokens: "AI tokens", "Yapay zekâ jetonları";
    entity: "Served by", "Hizmet veren";
    verified_at: "Verified on", "Doğrulama tarihi";
    role_owner: "Owner", "Sahip";
    role_manager: "Manager", "Yönetici";
    role_finance: "Finance", "Finans";
    role_developer: "Developer", "Geliştirici";
    role_visitor: "Visitor", "Ziyaretçi";
    back_to_orgs: "All organizations", "Tüm organizasyonlar";
    consent_title: "Allow access to your account?", "Hesabınıza erişime izin verilsin mi?";
    consent_wants: "asks to:", "şunları istiyor:";
    scope_openid: "Sign you in", "Sizi oturum açmış olarak tanımak";
    scope_email: "See your email address", "E-posta adresinizi görmek";
    scope_profile: "See your name", "Adınızı görmek";
    scope_orgs: "See your organizations and roles", "Organizasyonlarınızı ve rollerinizi görmek";
    scope_offline_access: "Keep access while you are away", "Siz yokken de erişimi sürdürmek";
    allow: "Allow", "İzin ver";
    deny: "Deny", "Reddet";
    sign_in_again: "This application asks you to sign in again. Sign out, then start from the application.", "Bu uygulama yeniden giriş yapmanızı istiyor. Çıkış yapın ve uygulamadan yeniden başlayın.";
    device_title: "Connect a device", "Cihaz bağla";
    device_code: "The code shown on your device", "Cihazınızda görünen kod";
    device_unknown: "This code is unknown or has expired.", "Bu kod bilinmiyor ya da süresi dolmuş.";
    device_approved: "Your device is connected. You can close this page.", "Cihazınız bağlandı. Bu sayfayı kapatabilirsiniz.";
    device_denied: "The request was refused. Nothing was connected.", "İstek reddedildi. Hiçbir şey bağlanmadı.";
    error_title: "Something went wrong", "Bir sorun oluştu";
    not_found: "There is nothing here, or it is not yours to see.", "Burada bir şey yok ya da görme yetkiniz yok.";
    forbidden: "You are not allowed to do this.", "Bu işlem için yetkiniz yok.";
    unavailable: "The service is unavailable. Try again in a moment.", "Hizmet şu anda kullanılamıyor. Birazdan tekrar deneyin.";
    form_expired: "This form has expired. Go back, reload the page and try again.", "Bu formun süresi doldu. Geri dönün, sayfayı yenileyin ve tekrar deneyin.";
    rate_limited: "Too many attempts. Wait a while and try again.", "Çok fazla deneme. Bir süre bekleyip tekrar deneyin.";
    home: "Home", "Ana sayfa";
    nav_staff: "Control tower", "Kontrol kulesi";
    section_members: "Members", "Üyeler";
    section_keys: "API keys", "API anahtarları";
    section_kyc: "Verification (KYC)", "Doğrulama (KYC)";
    section_wallet: "Wallet transactions", "Cüzdan hareketleri";
    role: "Role", "Rol";
    invites: "Invitations", "Davetler";
    no_invites: "No invitations.", "Davet yok.";
    invite_send: "Invite someone", "Birini davet edin";
    send: "Send the invitation", "Daveti gönder";
    revoke: "Revoke", "İptal et";
    invite_status_pending: "Waiting", "Bekliyor";
    invite_status_accepted: "Accepted", "Kabul edildi";
    invite_status_revoked: "Revoked", "İptal edildi";
    invite_status_expired: "Expired", "Süresi doldu";
    not_done: "That did not work:", "İşlem yapılamadı:";
    keys_none: "No API keys.", "API anahtarı yok.";
    key_create: "Create an API key", "API anahtarı oluşturun";
    key_name: "Key name", "Anahtar adı";
    key_created: "Copy this key now: it is shown only once.", "Bu anahtarı şimdi kopyalayın: yalnızca bir kez gösterilir.";
    created_at: "Created", "Oluşturuldu";
    revoked_at: "Revoked", "İptal edildi";
    active: "Active", "Etkin";
    kyc_submissions: "Submissions", "Başvurular";
    kyc_none: "Nothing submitted yet.", "Henüz başvuru yok.";
    kyc_submit: "Submit your details", "Bilgilerinizi gönderin";
    kyc_sub_pending: "Under review", "İnceleniyor";
    kyc_sub_approved: "Approved", "Onaylandı";
    kyc_sub_rejected: "Rejected", "Reddedildi";
    kyc_sub_more_info: "Corrections asked", "Düzeltme istendi";
    kyc_notes: "Reviewer's notes", "İnceleme notları";
    kyc_fix: "Please correct:", "Lütfen düzeltin:";
    field_full_name: "Full name", "Ad soyad";
    field_national_id: "National identity number", "T.C. kimlik numarası";
    field_company_name: "Company name", "Şirket unvanı";
    field_tax_id: "Tax number", "Vergi numarası";
    field_registration_number: "Registration number (optional)", "Sicil numarası (isteğe bağlı)";
    address: "Registered address", "Kayıtlı adres";
    field_line1: "Address line 1", "Adres satırı 1";
    field_line2: "Address line 2 (optional)", "Adres satırı 2 (isteğe bağlı)";
    field_city: "City", "Şehir";
    field_region: "Region (optional)", "Bölge (isteğe bağlı)";
    field_postal_code: "Postal code", "Posta kodu";
    notice_ack: "I have read the privacy notice: these details are kept for invoicing and tax law.", "Aydınlatma metnini okudum: bu bilgiler faturalama ve vergi mevzuatı için saklanır.";
    submit: "Submit", "Gönder";
    amount: "Amount", "Tutar";
    kind: "Kind", "Tür";
    note: "Note", "Not";
    when: "When", "Zaman";
    no_transactions: "No transactions yet.", "Henüz hareket yok.";
    staff_title: "Control tower", "Kontrol kulesi";
    staff_queues: "What needs a person", "İlgi bekleyenler";
    queue_kyc_submissions_pending: "KYC submissions waiting", "Bekleyen KYC başvuruları";
    queue_payment_claims_pending: "Payment claims waiting", "Bekleyen ödeme bildirimleri";
    queue_fulfilment_queue: "Servers to fulfil", "Teslim edilecek sunucular";
    queue_billing_runs_running: "Billing runs running", "Süren faturalama çalışmaları";
    queue_organizations_suspended: "Suspended organizations", "Askıdaki organizasyonlar";
    queue_webhook_endpoints_failing: "Failing webhook endpoints", "Hata veren webhook uç noktaları";
    queue_proposals_draft: "Draft proposals", "Taslak öneriler";
    dead_letters: "Dead letters", "Teslim edilemeyen iletiler";
    services_down: "Services not ready", "Hazır olmayan hizmetler";
    staff_kyc: "KYC queue", "KYC kuyruğu";
    staff_kyc_empty: "No submission is waiting.", "Bekleyen başvuru yok.";
    approve: "Approve", "Onayla";
    reject: "Reject", "Reddet";
    request_info: "Ask for corrections", "Düzeltme iste";
    notes: "Notes", "Notlar";
    staff_orgs: "Organizations", "Organizasyonlar";
    search: "Search", "Ara";
    search_label: "Name, organization id or tax number", "Ad, organizasyon kimliği ya da vergi numarası";
    no_results: "Nothing found.", "Sonuç yok.";
    nav_account: "Your account", "Hesabınız";
    section_profile: "Profile", "Profil";
    section_sessions: "Sessions", "Oturumlar";
    section_security: "Security", "Güvenlik";
    phone: "Phone", "Telefon";
    job_title: "Job title", "Unvan";
    timezone: "Time zone (e.g. Europe/Istanbul)", "Saat dilimi (ör. Europe/Istanbul)";
    language: "Language", "Dil";
    bio: "About you", "Hakkınızda";
    save: "Save", "Kaydet";
    saved: "Saved.", "Kaydedildi.";
    ip: "Address", "Adres";
    expires_at: "Expires", "Bitiş";
    this_device: "This device", "Bu cihaz";
    mfa_off: "Two-step verification is off.", "İki adımlı doğrulama kapalı.";
    mfa_on: "Two-step verification is on.", "İki adımlı doğrulama açık.";
    mfa_turn_on: "Turn on two-step verification", "İki adımlı doğrulamayı aç";
    mfa_scan: "Scan this code with your authenticator app, or type the key below, then enter the code it shows.", "Bu kodu doğrulama uygulamanızla tarayın ya da aşağıdaki anahtarı yazın; ardından uygulamanın gösterdiği kodu girin.";
    mfa_qr_alt: "QR code for your authenticator app", "Doğrulama uygulamanız için QR kod";
    mfa_key: "Key", "Anahtar";
    mfa_confirm: "Turn on", "Aç";
    mfa_start_over: "Start over with a new key", "Yeni bir anahtarla baştan başlayın";
    recovery_codes: "Your recovery codes. Keep them somewhere safe: each works once, and they are shown only now.", "Kurtarma kodlarınız. Güvenli bir yerde saklayın: her biri bir kez çalışır ve yalnızca şimdi gösterilir.";
    mfa_turn_off: "Turn off two-step verification", "İki adımlı doğrulamayı kapat";
    mfa_off_done: "Two-step verification is now off.", "İki adımlı doğrulama artık kapalı.";
    nav_assistant: "Assistant", "Asistan";
    assistant_title: "Assistant", "Asistan";
    assistant_ask: "Your message", "Mesajınız";
    assistant_send: "Send", "Gönder";
    assistant_org: "About the organization", "Hangi organizasyon için";
    assistant_any: "Any of mine", "Herhangi biri";
    assistant_you: "You", "Siz";
    assistant_staged: "Waiting for your confirmation:", "Onayınızı bekliyor:";
    assistant_confirm: "Confirm", "Onayla";
    assistant_cancel: "Cancel", "Vazgeç";
    assistant_done: "Done:", "Yapıldı:";
    assistant_cancelled: "Cancelled:", "İptal edildi:";
    assistant_unknown: "The outcome is not known yet. Confirm again in a moment to learn it; it will not run twice.", "Sonuç henüz bilinmiyor. Öğrenmek için birazdan yeniden onaylayın; işlem iki kez yapılmaz.";
    assistant_new: "New conversation", "Yeni konuşma";
    staff_users: "Users", "Kullanıcılar";
    staff_clients: "OAuth clients", "OAuth istemcileri";
    user_search_label: "Email, name or user id", "E-posta, ad ya da kullanıcı kimliği";
    last_sign_in: "Last sign-in", "Son giriş";
    status_disabled: "Disabled", "Devre dışı";
    mfa_short: "Two-step", "İki adım";
    yes: "Yes", "Evet";
    no: "No", "Hayır";
    reason: "Reason", "Gerekçe";
    disable: "Disable", "Devre dışı bırak";
    enable: "Enable", "Etkinleştir";
    end_sessions: "End all sessions", "Tüm oturumları sonlandır";
    suspend: "Suspend", "Askıya al";
    reactivate: "Reactivate", "Yeniden etkinleştir";
    client_register: "Register a client", "İstemci kaydedin";
    client_kind: "Kind", "Tür";
    client_public: "Public (a browser or command-line app, no secret)", "Herkese açık (tarayıcı ya da komut satırı uygulaması, gizli anahtar yok)";
    client_confidential: "Confidential (a back end that keeps a secret)", "Gizli (gizli anahtar saklayan bir sunucu)";
    client_first_party: "First party: our own product, no consent page", "Birinci taraf: kendi ürünümüz, onay sayfası yok";
    client_redirects: "Redirect URIs, one per line", "Yönlendirme adresleri, her satıra bir tane";
    client_logout_redirects: "Post-logout redirect URIs, one per line (optional)", "Çıkış sonrası yönlendirme adresleri, her satıra bir tane (isteğe bağlı)";
    client_orgs: "Allowed organization ids, one per line (optional: any)", "İzin verilen organizasyon kimlikleri, her satıra bir tane (isteğe bağlı: tümü)";
    client_scopes: "Scopes", "Kapsamlar";
    client_id: "Client id", "İstemci kimliği";
    client_secret_once: "Copy the client secret now: it is shown only once.", "İstemci gizli anahtarını şimdi kopyalayın: yalnızca bir kez gösterilir.";
    client_registered: "Registered.", "Kaydedildi.";
    retire: "Retire", "Kullanımdan kaldır";
    retired: "Retired", "Kullanımdan kaldırıldı";
    no_clients: "No clients yet.", "Henüz istemci yok.";
    section_billing: "Billing", "Faturalama";
    invoices: "Invoices and proformas", "Faturalar ve proformalar";
    no_invoices: "No invoices yet.", "Henüz fatura yok.";
    number: "Number", "Numara";
    total: "Total", "Toplam";
    paid: "Paid", "Ödenen";
    issued_at: "Issued", "Düzenlenme";
    due_at: "Due", "Vade";
    preview: "Preview", "Önizleme";
    inv_invoice: "Invoice", "Fatura";
    inv_proforma: "Proforma", "Proforma";
    inv_issued: "Open", "Açık";
    inv_partially_paid: "Partly paid", "Kısmen ödendi";
    inv_paid: "Paid in full", "Tamamen ödendi";
    inv_void: "Void", "İptal";
    payments: "Payments", "Ödemeler";
    no_payments: "No payments yet.", "Henüz ödeme yok.";
    method: "Method", "Yöntem";
    reference: "Reference", "Referans";
    received_at: "Received", "Alındı";
    section_webhooks: "Webhooks", "Webhook'lar";
    webhook_url: "Endpoint URL", "Uç nokta adresi";
    webhook_add: "Add an endpoint", "Uç nokta ekleyin";
    webhook_secret_once: "Copy this signing secret now: it is shown only once.", "Bu imzalama anahtarını şimdi kopyalayın: yalnızca bir kez gösterilir.";
    no_webhooks: "No endpoints yet.", "Henüz uç nokta yok.";
    remove: "Remove", "Kaldır";
    deliveries: "Deliveries", "Teslimatlar";
    no_deliveries: "Nothing delivered yet.", "Henüz teslimat yok.";
    event: "Event", "Olay";
    attempts: "Attempts", "Denemeler";
    retry: "Retry", "Yeniden dene";
    section_memory: "Assistant's memory", "Asistanın hafızası";
    soul: "What the assistant should always know about you", "Asistanın sizinle ilgili hep bilmesi gerekenler";
    memory_curated: "What the assistant has learned (curated each night)", "Asistanın öğrendikleri (her gece düzenlenir)";
    memory_empty: "Nothing yet.", "Henüz bir şey yok.";
    invite_title: "Join an organization", "Organizasyona katılın";
    invite_body: "You were invited to join an organization. Accept to become a member with the role the invitation gives.", "Bir organizasyona katılmaya davet edildiniz. Davetteki rolle üye olmak için kabul edin.";
    accept: "Accept the invitation", "Daveti kabul et";
    invite_other_email: "This invitation is for another email address. Sign out and sign in with the invited address.", "Bu davet başka bir e-posta adresi için. Çıkış yapıp davet edilen adresle giriş yapın.";
    actions: "Actions", "İşlemler";
    add: "Add", "Ekle";
    rename: "Rename", "Yeniden adlandır";
    delete: "Delete", "Sil";
    description: "Description", "Açıklama";
    url: "Address (https)", "Adres (https)";
    currency: "Currency", "Para birimi";
    invoice: "Invoice", "Fatura";
    none_option: "None", "Yok";
    show: "Show", "Göster";
    since: "From", "Başlangıç";
    until: "Until", "Bitiş";
    whole_number: "Type a whole number, or leave it empty.", "Bir tam sayı yazın ya da boş bırakın.";
    amount_typed: "Type the amount as digits, with at most two decimals (1234.56).", "Tutarı rakamla, en fazla iki ondalıkla yazın (1234,56).";
    section_projects: "Projects", "Projeler";
    no_projects: "No projects yet.", "Henüz proje yok.";
    project_add: "Add a project", "Proje ekleyin";
    section_assets: "Assets", "Varlıklar";
    no_assets: "No assets yet.", "Henüz varlık yok.";
    asset_add: "Add an asset", "Varlık ekleyin";
    asset_document: "Document", "Belge";
    asset_logo: "Logo", "Amblem";
    asset_link: "Link", "Bağlantı";
    asset_other: "Other", "Diğer";
    section_ai: "AI", "Yapay zekâ";
    ai_members: "Members' AI settings", "Üyelerin yapay zekâ ayarları";
    ai_members_note: "A member with AI off cannot use the assistant; a personal limit caps the tokens they may spend.", "Yapay zekâsı kapalı bir üye asistanı kullanamaz; kişisel sınır harcayabileceği jetonları sınırlar.";
    ai_enabled: "AI enabled", "Yapay zekâ açık";
    token_limit: "Personal token limit", "Kişisel jeton sınırı";
    tokens_spent: "Tokens spent", "Harcanan jeton";
    no_limit: "No limit", "Sınırsız";
    no_members: "No members.", "Üye yok.";
    usage: "Token usage", "Jeton kullanımı";
    usage_total: "Tokens spent in all:", "Toplam harcanan jeton:";
    usage_by: "Grouped by", "Gruplama";
    by_member: "Member", "Üye";
    by_model: "Model", "Yapay zekâ modeli";
    by_day: "Day", "Gün";
    spends: "Spends", "Harcama sayısı";
    no_usage: "Nothing spent in this period.", "Bu dönemde harcama yok.";
    section_claims: "Payment claims", "Ödeme bildirimleri";
    claims_note: "Paid by bank transfer? Tell us here: staff match it against the bank account and apply it.", "Havale ile mi ödediniz? Buradan bildirin: ekibimiz banka hesabıyla eşleştirip uygular.";
    claim_add: "Tell us about a payment", "Bir ödemeyi bildirin";
    no_claims: "No claims yet.", "Henüz bildirim yok.";
    claim_pending: "Waiting for review", "İnceleme bekliyor";
    claim_approved: "Approved", "Onaylandı";
    claim_rejected: "Rejected", "Reddedildi";
    review_notes: "Staff notes", "Ekip notları";
    section_servers: "Servers", "Sunucular";
    srv_none: "No servers yet.", "Henüz sunucu yok.";
    srv_hostname: "Host name", "Sunucu adı";
    srv_plan: "Plan", "Paket";
    per_month: "a month", "aylık";
    srv_order: "Order", "Sipariş ver";
    srv_order_title: "Order a server", "Sunucu sipariş edin";
    srv_provisioning: "Being set up", "Kuruluyor";
    srv_pending_fulfilment: "Waiting for our team", "Ekibimizi bekliyor";
    srv_active: "Running", "Çalışıyor";
    srv_stopped: "Stopped", "Durduruldu";
    srv_suspended: "Suspended", "Askıda";
    srv_failed: "Failed", "Başarısız";
    srv_terminated: "Terminated", "Sonlandırıldı";
    srv_reboot: "Reboot", "Yeniden başlat";
    srv_stop: "Stop", "Durdur";
    srv_start: "Start", "Başlat";
    srv_activated: "Running since", "Çalışma başlangıcı";
    srv_failure: "What went wrong", "Ne ters gitti";
    srv_credentials: "Access", "Erişim";
    srv_credentials_note: "Every look at these credentials is recorded. Rotate them if they may have leaked.", "Bu bilgilere her bakış kaydedilir. Sızmış olabilirlerse yenileyin.";
    srv_no_credentials: "Credentials appear here once the server runs.", "Erişim bilgileri sunucu çalışınca burada görünür.";
    srv_host: "Address", "Adres";
    srv_username: "User name", "Kullanıcı adı";
    srv_password: "Password", "Parola";
    srv_rotate: "Rotate the password", "Parolayı yenile";
    srv_controls: "Power and termination", "Güç ve sonlandırma";
    srv_terminate: "Terminate the server", "Sunucuyu sonlandır";
    srv_terminate_note: "Terminating deletes the server and its data for good.", "Sonlandırma sunucuyu ve verilerini kalıcı olarak siler.";
    dist_overview: "Overview", "Genel bakış";
    access: "Access", "Erişim hakkı";
    allowed_orgs: "Allowed organizations (ids, one per line; none: every one)", "İzinli organizasyonlar (kimlikler, satır başına bir; boş: hepsi)";
    article_add: "Write an article", "Makale yazın";
    article_edit: "Edit the article", "Makaleyi düzenleyin";
    articles: "Articles", "Makaleler";
    body_md: "Text (Markdown)", "Metin (Markdown)";
    brand: "Brand", "Marka";
    categories: "Categories", "Kategoriler";
    category: "Category", "Kategori";
    category_add: "Add a category", "Kategori ekleyin";
    charges: "Charges", "Ücretler";
    charge_add: "Add a charge", "Ücret ekleyin";
    charge_pending: "Pending", "Bekliyor";
    charge_quoted: "On a proforma", "Proformada";
    charge_invoiced: "Invoiced", "Faturalandı";
    charge_waived: "Waived", "Silindi";
    claims_queue_note: "Match each claim against the bank account before approving it: approving records the payment.", "Onaylamadan önce her bildirimi banka hesabıyla eşleştirin: onay ödemeyi kaydeder.";
    client_edit: "Edit the client", "İstemciyi düzenleyin";
    client_secret: "Client secret", "İstemci gizli anahtarı";
    client_secret_new: "The new client secret: copy it now, it is shown only once. The old one no longer works.", "Yeni istemci gizli anahtarı: şimdi kopyalayın, yalnızca bir kez gösterilir. Eskisi artık çalışmaz.";
    confirm_duplicate: "Yes, record it although it looks like a duplicate", "Evet, mükerrer görünse de kaydet";
    credit_remainder: "Credit what exceeds the invoice to the wallet", "Faturayı aşan kısmı cüzdana ekle";
    convert: "Convert to an invoice", "Faturaya dönüştür";
    draft: "Draft", "Taslak";
    duplicate_of: "Looks like", "Benzediği";
    ends: "Ends", "Bitiş zamanı";
    expires: "Expires", "Sona erer";
    first_party: "Our own product (no consent screen)", "Kendi ürünümüz (onay ekranı yok)";
    fulfil_api: "Automatic", "Otomatik";
    fulfil_manual: "By our team", "Ekibimizce";
    fulfilment: "Set up", "Kurulum";
    issue_proforma: "Issue a proforma from the pending charges", "Bekleyen ücretlerden proforma düzenle";
    issue_invoice: "Issue an invoice from the pending charges", "Bekleyen ücretlerden fatura düzenle";
    legal_document_url: "Legal document (https)", "Resmî belge (https)";
    listed: "In the catalog", "Katalogda";
    maintenance: "Maintenance windows", "Bakım aralıkları";
    maintenance_add: "Announce a maintenance window", "Bakım aralığı duyurun";
    memberships: "Memberships", "Üyelikler";
    method_bank_transfer: "Bank transfer", "Havale";
    method_manual: "Manual", "Elle";
    method_other: "Other", "Başka";
    mfa: "Two-step verification", "İki adımlı doğrulama";
    model_change: "Choose the model", "Modeli seçin";
    model_note: "The assistant answers with this model; with no provider reachable, the rule-based matcher answers.", "Asistan bu modelle yanıt verir; sağlayıcıya ulaşılamazsa kural tabanlı eşleştirici yanıtlar.";
    model_now: "Model in use", "Kullanılan model";
    next_page: "Next page", "Sonraki sayfa";
    no_articles: "No articles yet.", "Henüz makale yok.";
    no_categories: "No categories yet.", "Henüz kategori yok.";
    no_charges: "No charges.", "Ücret yok.";
    no_memberships: "No memberships.", "Üyelik yok.";
    no_proposals: "No proposals.", "Öneri yok.";
    no_sessions: "No live sessions.", "Açık oturum yok.";
    no_skus: "No SKUs yet.", "Henüz ürün yok.";
    no_windows: "No maintenance ahead.", "Yaklaşan bakım yok.";
    org: "Organization", "Organizasyon";
    passkeys: "Passkeys", "Geçiş anahtarları";
    pay_from_wallet: "Pay from the wallet", "Cüzdandan öde";
    payment_add: "Record a payment", "Ödeme kaydedin";
    period: "Month", "Ay";
    position: "Order", "Sıra";
    post_logout_uris: "Addresses after sign-out (one per line)", "Çıkıştan sonraki adresler (satır başına bir)";
    price: "Monthly price", "Aylık fiyat";
    prop_accepted: "Accepted", "Kabul edildi";
    prop_done: "Done", "Yapıldı";
    prop_problem: "Problem", "Sorun";
    prop_proposal: "Proposal", "Öneri";
    prop_rejected: "Rejected", "Reddedildi";
    provider_configured: "Model provider configured", "Yapay zekâ sağlayıcısı ayarlı";
    published: "Published", "Yayında";
    queue_empty: "Nothing waiting.", "Bekleyen bir şey yok.";
    record: "Record", "Kaydet";
    redirect_uris: "Redirect addresses (one per line)", "Yönlendirme adresleri (satır başına bir)";
    refresh: "Refresh", "Yenile";
    rotate_note: "A new secret replaces the old one at once: the product must be given the new one.", "Yeni gizli anahtar eskisinin yerini hemen alır: ürüne yenisi verilmelidir.";
    rotate_secret: "Make a new secret", "Yeni gizli anahtar oluştur";
    run_done: "Done", "Bitti";
    run_failed: "Organizations the run could not invoice", "Çalışmanın faturalayamadığı organizasyonlar";
    run_finished: "Finished", "Bitiş";
    run_no_failures: "None.", "Yok.";
    run_note: "Invoices every organization's pending usage charges of the month. Starting a month that has a run works it again: only what is still pending.", "Her organizasyonun ayın bekleyen kullanım ücretlerini faturalar. Çalışması olan bir ayı başlatmak onu yeniden işler: yalnızca hâlâ bekleyenleri.";
    run_organizations: "Organizations", "Organizasyonlar";
    run_running: "Running", "Sürüyor";
    run_start: "Run a month's billing", "Bir ayın faturalamasını çalıştırın";
    run_started: "Started", "Başlangıç zamanı";
    scopes: "Scopes (separated by spaces)", "Kapsamlar (boşlukla ayrılmış)";
    sessions: "Sessions", "Oturumlar";
    sku_add: "Add a SKU", "Ürün ekleyin";
    skus: "SKUs", "Ürünler";
    sla_hours: "Set-up promise (hours)", "Kurulum sözü (saat)";
    staff_catalog: "Catalog", "Katalog";
    staff_claims: "Payment claims", "Ödeme bildirimleri";
    staff_kb: "Knowledge base", "Bilgi bankası";
    staff_model: "Assistant model", "Asistan modeli";
    staff_proposals: "Proposals", "Öneriler";
    staff_runs: "Billing runs", "Faturalama çalışmaları";
    starts: "Starts", "Başlangıç saati";
    date_typed: "Type a date.", "Bir tarih yazın.";
    time_typed: "Type a date and a time.", "Bir tarih ve saat yazın.";
    title_field: "Title", "Başlık";
    updated: "Updated", "Güncellendi";
    user_disabled: "Disabled", "Devre dışı";
    void: "Void", "İptal et";
    waive: "Waive", "Sil";
    address_line: "Address", "Adres satırı";
    bank_name: "Bank", "Banka";
    bank_iban: "IBAN", "IBAN";
    bank_swift: "SWIFT", "SWIFT";
    contact_email: "Contact email", "İletişim e-postası";
    contact_phone: "Contact phone", "İletişim telefonu";
    legal_name: "Legal name", "Ticari unvan";
    tax_id: "Tax number", "Vergi numarası";
    profit_pct: "Profit share (%)", "Kâr payı (%)";
    pct_typed: "Type the profit share as a number from 0 to 100.", "Kâr payını 0 ile 100 arasında bir sayı olarak yazın.";
    staff_distributors: "Distributors", "Distribütörler";
    no_distributors: "No distributor entities.", "Distribütör yok.";
    no_orgs_here: "No organizations yet.", "Henüz organizasyon yok.";
    dist_add: "Add a distributor entity", "Distribütör ekleyin";
    dist_covers: "Countries served", "Hizmet verilen ülkeler";
    dist_edit: "Edit the entity", "Distribütörü düzenleyin";
    dist_observers: "Observers", "Gözlemciler";
    dist_observers_note: "Observers see this entity's organizations, invoices, payments and reports, read-only.", "Gözlemciler bu distribütörün organizasyonlarını, faturalarını, ödemelerini ve raporlarını salt okunur görür.";
    dist_no_observers: "No observers.", "Gözlemci yok.";
    dist_report: "Monthly report", "Aylık rapor";
    dist_no_report: "No invoice was paid in this month.", "Bu ay ödenen fatura yok.";
    dist_paid_invoices: "Paid invoices", "Ödenen faturalar";
    dist_paid_total: "Paid in all", "Toplam ödenen";
    dist_share: "Entity's share", "Distribütör payı";
    signed_out_here: "Signed out in this browser", "Bu tarayıcıda çıkış yapıldı";
    signed_out_here_body: "The hub did not answer, so your session may still be open elsewhere. Sign in on another device and end it under Account, Sessions; otherwise it ends by itself in 30 days.", "Hub yanıt vermedi; oturumunuz başka yerde hâlâ açık olabilir. Başka bir cihazda giriş yapıp Hesap, Oturumlar altından sonlandırın; yoksa 30 gün içinde kendiliğinden sona erer.";
    invite_closed: "This invitation was already used, revoked or has expired, or you are already a member.", "Bu davet kullanılmış, iptal edilmiş ya da süresi dolmuş veya zaten üyesiniz.";
    passkeys_note: "A passkey signs you in with this device's screen lock (fingerprint, face or PIN) instead of a mailed link. It never leaves your device.", "Geçiş anahtarı, e-postayla gelen bağlantı yerine cihazınızın ekran kilidiyle (parmak izi, yüz ya da PIN) giriş yapmanızı sağlar. Cihazınızdan hiç çıkmaz.";
    passkeys_none: "No passkeys yet.", "Henüz geçiş anahtarı yok.";
    passkeys_unreadable: "Your passkeys cannot be listed right now. Try again in a moment.", "Geçiş anahtarlarınız şu anda listelenemiyor. Birazdan tekrar deneyin.";
    passkey_added_at: "Added", "Eklenme zamanı";
    passkey_last_used: "Last used", "Son kullanım";
    passkey_never_used: "Not yet", "Henüz kullanılmadı";
    passkey_add: "Add a passkey", "Geçiş anahtarı ekleyin";
    passkey_name: "Name of the new passkey (for example, the device it is on)", "Yeni geçiş anahtarının adı (örneğin bulunduğu cihaz)";
    passkey_new_name: "New name for", "Yeni ad:";
    passkey_unsupported: "Passkeys need a browser that supports them, with JavaScript on.", "Geçiş anahtarları için bunları destekleyen ve JavaScript'i açık bir tarayıcı gerekir.";
    passkey_sign_in: "Sign in with a passkey", "Geçiş anahtarıyla giriş yap";
    passkey_use: "Use a passkey", "Geçiş anahtarı kullan";
    passkey_mfa_hint: "Or confirm with one of your passkeys instead of a code.", "Ya da kod yerine geçiş anahtarlarınızdan biriyle onaylayın.";
    passkey_working: "Follow your browser's prompt to use your passkey.", "Geçiş anahtarınızı kullanmak için tarayıcınızın yönergelerini izleyin.";
    passkey_cancelled: "No passkey was used: the prompt was closed or timed out. Try again when you are ready.", "Geçiş anahtarı kullanılmadı: pencere kapatıldı ya da süre doldu. Hazır olduğunuzda tekrar deneyin.";
    passkey_failed: "The passkey did not work. Try again, or use the mailed link.", "Geçiş anahtarı işe yaramadı. Tekrar deneyin ya da e-postayla gelen bağlantıyı kullanın.";
    passkey_refused: "This passkey was not accepted. Try another one, or use the mailed link.", "Bu geçiş anahtarı kabul edilmedi. Başka birini deneyin ya da e-postayla gelen bağlantıyı kullanın.";
    passkey_not_added: "The passkey was not added.", "Geçiş anahtarı eklenmedi.";
    passkey_exists: "This device already holds a passkey for your account.", "Bu cihazda hesabınız için zaten bir geçiş anahtarı var.";
    passkey_name_needed: "Type a name for the passkey first.", "Önce geçiş anahtarına bir ad verin.";
    passkey_reauth: "Adding a passkey needs a recent sign-in, with your passkey or code if you have one. Sign in again, then add it.", "Geçiş anahtarı eklemek için yakın zamanda, varsa geçiş anahtarınız veya kodunuzla giriş yapmış olmanız gerekir. Yeniden giriş yapın, ardından ekleyin.";
    passkey_sign_in_again: "Sign in again", "Yeniden giriş yapın";
    passkey_deleted: "The passkey was deleted.", "Geçiş anahtarı silindi.";
    passkey_added_notice: "The passkey was added. You can sign in with it from now on.", "Geçiş anahtarı eklendi. Bundan sonra onunla giriş yapabilirsiniz.";
    passkey_step_expired: "This sign-in has expired. Start again with a new link.", "Bu girişin süresi doldu. Yeni bir bağlantıyla yeniden başlayın.";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_both_languages_and_turkish_is_not_a_copy() {
        let mut same = Vec::new();
        for (key, en, tr) in KEYS {
            assert!(!en.trim().is_empty(), "{key}: no English");
            assert!(!tr.trim().is_empty(), "{key}: no Turkish");
            // Words Turkish writes as English does.
            if en == tr
                && !matches!(
                    *key,
                    "product" | "inv_proforma" | "bank_iban" | "bank_swift"
                )
            {
                same.push(*key);
            }
        }
        assert!(same.is_empty(), "untranslated: {same:?}");
    }

    #[test]
    fn accept_language_picks_the_best_of_ours() {
        assert_eq!(Lang::negotiate("tr-TR,tr;q=0.9,en;q=0.8"), Some(Lang::Tr));
        assert_eq!(Lang::negotiate("de-DE, en;q=0.5, tr;q=0.7"), Some(Lang::Tr));
        assert_eq!(Lang::negotiate("en-GB"), Some(Lang::En));
        assert_eq!(Lang::negotiate("de, fr;q=0.9"), None);
        assert_eq!(Lang::negotiate("tr;q=0, en;q=0.1"), Some(Lang::En));
        assert_eq!(Lang::negotiate(""), None);
    }
}
